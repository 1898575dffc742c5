"""The rest of torch's function namespace for dense real tensors: the function forms of in-place methods
(``torch.abs_(x)``), the ``*_copy`` forms of the views, the global settings (threads, generator state,
deterministic mode) and a few math functions, each composed from the differentiable ops, so gradients and
double backward come from those ops.
"""

from __future__ import annotations

import builtins
import math
import warnings

import numpy as np

from .. import _typeinfo, _types
from .._tensor import Tensor
from .._types import to_dtype, wrap_dim
from ..autograd import grad_mode
from ..autograd.function import Function
from ..autograd.grad_mode import state as grad_state
from ..backend.cpu_threads import openblas as _openblas
from ..scalar_math import ROWS
from . import (
    _common,
    complex_ops,
    creation,
    elementwise,
    indexing,
    inplace,
    linalg,
    linalg_functions,
    more,
    reduction,
    shape,
    tensor_methods,
)
from ._registry import Sample, T, declare

# --- in-place function forms ------------------------------------------------------------------------------------
#: torch's in-place functions whose op is a row of the elementwise table: each ``torch.<name>_(x, ...)`` is
#: ``x.<name>_(...)``, the row's generated in-place method.
_ROW_INPLACE_FUNCTIONS = (
    "abs acos acosh arccos arccosh arcsin arcsinh arctan arctanh asin asinh atan atanh ceil cos cosh deg2rad erf "
    "erfc exp exp2 expm1 floor frac log log10 log1p log2 logit neg rad2deg reciprocal round rsqrt sigmoid sin sinc "
    "sinh sqrt square tan tanh trunc xlogy clamp relu"
).split()

#: torch's in-place functions whose method is not a table row's: the same ``x.<name>(...)`` call.
_METHOD_INPLACE_FUNCTIONS = (
    "clamp_max_ clamp_min_ clip_ fix_ negative_ detach_ fill_ zero_ index_put_ gcd_ lcm_ ldexp_ addmv_ resize_as_ "
    "i0_ as_strided_"
).split()


def _method_form(method: str):
    """``torch.<method>(input, ...)``: the Tensor method ``input.<method>(...)``."""

    def function(input: Tensor, *args, **kwargs):  # noqa: A002 - torch's parameter name
        return getattr(input, method)(*args, **kwargs)

    function.__name__ = function.__qualname__ = method
    function.__doc__ = f"``input.{method}(...)``: torch's function form of the in-place Tensor method."
    return function


def _register_inplace_functions() -> None:
    for name in _ROW_INPLACE_FUNCTIONS:
        row = next(r for r in ROWS.values() if name in r.methods)
        if not row.inplace:
            raise ValueError(f"the table row {row.name!r} has no in-place form")
        declare(_method_form(name + "_"))
    for method in _METHOD_INPLACE_FUNCTIONS:
        declare(_method_form(method))


_register_inplace_functions()


# --- the *_copy forms of the views --------------------------------------------------------------------------------
_COPY_NODES: dict[str, type] = {}


def _copied(result, node_name: str):
    """``result`` (a view, or a tuple of views) copied into fresh contiguous storage; the copy's graph node prints
    ``node_name`` as torch's does (``TBackward0_copy``) and passes the gradient straight to the view's node."""
    cls = _COPY_NODES.get(node_name)
    if cls is None:
        cls = _COPY_NODES[node_name] = type(
            node_name.replace("Backward0", ""), (shape.Clone,), {"node_name": node_name}
        )
    if isinstance(result, (tuple, list)):
        return tuple(cls.apply(r) for r in result)
    return cls.apply(result)


@declare(samples=(Sample(T(2, 3)),))
def alias_copy(input: Tensor) -> Tensor:  # noqa: A002
    """A copy of ``input`` (torch's copy form of its ``alias`` view)."""
    return _copied(input, "AliasBackward0_copy")


@declare
def detach_copy(input: Tensor) -> Tensor:  # noqa: A002
    """A copy of ``input`` outside the graph."""
    return input.detach().clone()


@declare(samples=(Sample(T(3, 4)), Sample(T(2, 3, 4), 1, 0, 2)))
def diagonal_copy(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:  # noqa: A002
    """A copy of ``input.diagonal(offset, dim1, dim2)``."""
    return _copied(input.diagonal(offset, dim1, dim2), "DiagonalBackward0_copy")


@declare(samples=(Sample(T(3, 1), [2, 3, 4]),))
def expand_copy(input: Tensor, size, *, implicit: bool = False) -> Tensor:  # noqa: A002
    """A copy of ``input.expand(size)`` (``implicit`` is torch's tracing flag and changes nothing)."""
    return _copied(input.expand(*size), "ExpandBackward0_copy")


@declare(samples=(Sample(T(4, 3), 0, 1, 2), Sample(T(4, 3), -1, 1, 1)))
def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:  # noqa: A002
    """A copy of ``input.narrow(dim, start, length)``."""
    return _copied(input.narrow(dim, start, length), "NarrowCopyBackward0")


@declare(samples=(Sample(T(6), (2, 2), (1, 2), 1), Sample(T(3, 4), (2, 3), (4, 1))))
def as_strided_copy(input: Tensor, size, stride, storage_offset=None) -> Tensor:  # noqa: A002
    """A copy of ``input.as_strided(size, stride, storage_offset)``."""
    return _copied(input.as_strided(size, stride, storage_offset), "AsStridedBackward0_copy")


@declare(samples=(Sample(T(2, 3, 4), [2, 0, 1]),))
def permute_copy(input: Tensor, dims) -> Tensor:  # noqa: A002
    """A copy of ``input.permute(dims)``."""
    return _copied(input.permute(*dims), "PermuteBackward0_copy")


@declare(samples=(Sample(T(3, 4), 1, 2),))
def select_copy(input: Tensor, dim: int, index: int) -> Tensor:  # noqa: A002
    """A copy of ``input.select(dim, index)``."""
    return _copied(input.select(dim, index), "SelectBackward0_copy")


@declare(samples=(Sample(T(5, 3), 0, 1, 4, 2), Sample(T(2, 5), 1, None, -1)))
def slice_copy(input: Tensor, dim: int = 0, start=None, end=None, step: int = 1) -> Tensor:  # noqa: A002
    """A copy of ``input``'s elements ``start:end:step`` along ``dim``."""
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    d = wrap_dim(dim, input.dim())
    return _copied(input[(slice(None),) * d + (slice(start, end, step),)], "SliceBackward0_copy")


@declare(samples=(Sample(T(5, 2), 2), Sample(T(2, 5), 3, 1)))
def split_copy(input: Tensor, split_size: int, dim: int = 0) -> tuple:  # noqa: A002
    """Copies of the pieces of ``input.split(split_size, dim)``."""
    return _copied(shape.split(input, int(split_size), dim), "SplitBackward0_copy")


@declare(methods=True, samples=(Sample(T(5, 2), [2, 3]), Sample(T(2, 5), [1, 0, 4], 1)))
def split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:  # noqa: A002
    """Views of ``input`` in pieces of the listed sizes along ``dim`` (``split`` given a list)."""
    return shape.split(input, list(split_sizes), dim)


@declare(samples=(Sample(T(5, 2), [2, 3]),))
def split_with_sizes_copy(input: Tensor, split_sizes, dim: int = 0) -> tuple:  # noqa: A002
    """Copies of the pieces of ``input.split_with_sizes(split_sizes, dim)``."""
    return _copied(shape.split(input, list(split_sizes), dim), "SplitWithSizesBackward0_copy")


@declare(samples=(Sample(T(1, 3, 1)), Sample(T(1, 3, 1), 2)))
def squeeze_copy(input: Tensor, dim=None) -> Tensor:  # noqa: A002
    """A copy of ``input.squeeze(dim)``."""
    if dim is None:
        return _copied(input.squeeze(), "SqueezeBackward0_copy")
    return _copied(input.squeeze(dim), "SqueezeBackward1_copy" if isinstance(dim, int) else "SqueezeBackward2_copy")


@declare(samples=(Sample(T(2, 3)),))
def t_copy(input: Tensor) -> Tensor:  # noqa: A002
    """A copy of ``input.t()``."""
    return _copied(input.t(), "TBackward0_copy")


@declare(samples=(Sample(T(2, 3, 4), 0, 2),))
def transpose_copy(input: Tensor, dim0: int, dim1: int) -> Tensor:  # noqa: A002
    """A copy of ``input.transpose(dim0, dim1)``."""
    return _copied(input.transpose(dim0, dim1), "TransposeBackward0_copy")


@declare(samples=(Sample(T(2, 3)), Sample(T(2, 3), 1)))
def unbind_copy(input: Tensor, dim: int = 0) -> tuple:  # noqa: A002
    """Copies of the slices of ``input.unbind(dim)``."""
    return _copied(shape.unbind(input, dim), "UnbindBackward0_copy")


@declare(samples=(Sample(T(7), 0, 3, 2), Sample(T(2, 5), 1, 2, 1)))
def unfold_copy(input: Tensor, dimension: int, size: int, step: int) -> Tensor:  # noqa: A002
    """The windows of ``size`` elements every ``step`` along ``dimension``, as a new last dim (a copy of torch's
    ``Tensor.unfold`` view)."""
    d = wrap_dim(dimension, max(input.dim(), 1))
    length = input.shape[d] if input.dim() else 1
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if input.dim() == 0:
        return _copied(input.reshape(1), "UnfoldBackward0_copy")
    windows = [shape.narrow(input, d, start, size) for start in range(0, length - size + 1, step)]
    return _copied(more.movedim(shape.stack(windows, d), d + 1, -1), "UnfoldBackward0_copy")


@declare(samples=(Sample(T(2, 3), 1),))
def unsqueeze_copy(input: Tensor, dim: int) -> Tensor:  # noqa: A002
    """A copy of ``input.unsqueeze(dim)``."""
    return _copied(input.unsqueeze(dim), "UnsqueezeBackward0_copy")


@declare(samples=(Sample(T(2, 3), [3, 2]), Sample(T(2, 3), [-1])))
def view_copy(input: Tensor, size) -> Tensor:  # noqa: A002
    """A copy of ``input.view(size)`` (or of ``input.view(dtype)`` given a dtype)."""
    if isinstance(size, _types.dtype):  # the same bytes read as another dtype
        return Tensor._make(np.ascontiguousarray(input._host()).view(size.numpy).copy()).to(input.device)
    return _copied(input.view(*size), "ViewBackward0_copy")


@declare(samples=(Sample(T(5, 2), 2), Sample(T(2, 5), 3, 1)))
def unsafe_split(input: Tensor, split_size: int, dim: int = 0) -> tuple:  # noqa: A002
    """``split`` whose pieces are not tracked as views (here: copies, which no in-place write can make stale)."""
    return _copied(shape.split(input, int(split_size), dim), "UnsafeSplitBackward0")


@declare(samples=(Sample(T(5, 2), [2, 3]),))
def unsafe_split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:  # noqa: A002
    """``split_with_sizes`` whose pieces are not tracked as views (here: copies)."""
    return _copied(shape.split(input, list(split_sizes), dim), "UnsafeSplitWithSizesBackward0")


@declare(samples=(Sample(T(5, 2), 2), Sample(T(2, 5), 3, 1)))
def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:  # noqa: A002
    """``chunk`` whose pieces are not tracked as views (here: copies)."""
    return _copied(shape.chunk(input, chunks, dim), "UnsafeSplitBackward0")


# --- global settings ----------------------------------------------------------------------------------------------
_settings = {
    "num_threads": None,  # what set_num_threads was given (None: never called)
    "matmul_precision": "highest",
    "deterministic": False,
    "deterministic_warn_only": False,
    "warn_always": False,
}


@declare
def set_num_threads(int: int) -> None:  # noqa: A002 - torch's parameter name
    """Set the number of threads of numbagrad's parallel CPU work: Numba's thread count (capped at the threads
    Numba started, ``NUMBA_NUM_THREADS``, the cores by default) and that of numpy's bundled OpenBLAS (matmul)."""
    if isinstance(int, bool) or not isinstance(int, (builtins.int, np.integer)):
        raise RuntimeError(f"set_num_threads expects an int, but got {type(int).__name__}")
    if int <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    import numba  # (lazy: import numbagrad never imports numba)

    numba.set_num_threads(min(builtins.int(int), numba.config.NUMBA_NUM_THREADS))
    blas = _openblas()
    if blas is not None:
        blas.set_num_threads(builtins.int(int))
    _settings["num_threads"] = builtins.int(int)


@declare
def get_num_threads() -> int:
    """The number of threads used by numbagrad's parallel CPU kernels (the last ``set_num_threads``, else Numba's
    count)."""
    if _settings["num_threads"] is not None:
        return _settings["num_threads"]
    import numba  # (lazy: import numbagrad never imports numba)

    return numba.get_num_threads()


@declare
def set_default_device(device) -> None:
    """Make ``device`` where factories (``zeros``, ``tensor``, ``arange``, ``rand``...) put tensors given no
    ``device=``; None restores the CPU."""
    _types.default_device[0] = _types.CPU if device is None else _types.to_device(device)


@declare
def get_default_device() -> _types.device:
    """Where factories put tensors given no ``device=`` (the CPU unless ``set_default_device`` said otherwise)."""
    return _types.default_device[0]


@declare
def initial_seed() -> int:
    """The seed of the global generator: the last ``manual_seed``, or the one drawn from OS entropy at start."""
    return creation._initial_seed[0]


_STATE_BYTES = 16 + 16 + 1 + 4  # PCG64: state, increment, has_uint32, uinteger


@declare
def get_rng_state() -> Tensor:
    """The global generator's state as a uint8 tensor, for ``set_rng_state`` (numbagrad's generator is numpy's
    PCG64, so the state is 37 bytes, not torch's 5056)."""
    st = creation._rng[0].bit_generator.state
    raw = (
        st["state"]["state"].to_bytes(16, "little")
        + st["state"]["inc"].to_bytes(16, "little")
        + bytes([st["has_uint32"]])
        + st["uinteger"].to_bytes(4, "little")
    )
    return Tensor._make(np.frombuffer(raw, dtype=np.uint8).copy())


@declare
def set_rng_state(new_state: Tensor) -> None:
    """Restore the global generator to a state ``get_rng_state`` returned."""
    if not isinstance(new_state, Tensor) or new_state.dtype != _types.uint8:
        raise TypeError("RNG state must be a torch.ByteTensor")
    raw = bytes(new_state._host().reshape(-1))
    if len(raw) != _STATE_BYTES:
        raise RuntimeError(f"RNG state is wrong size: expected {_STATE_BYTES} bytes, got {len(raw)}")
    generator = np.random.PCG64()
    generator.state = {
        "bit_generator": "PCG64",
        "state": {
            "state": builtins.int.from_bytes(raw[:16], "little"),
            "inc": builtins.int.from_bytes(raw[16:32], "little"),
        },
        "has_uint32": raw[32],
        "uinteger": builtins.int.from_bytes(raw[33:], "little"),
    }
    creation._rng[0] = np.random.Generator(generator)


@declare
def set_default_tensor_type(t) -> None:
    """The legacy way to set the default float dtype: ``"torch.DoubleTensor"`` or ``numbagrad.DoubleTensor``
    (deprecated by torch, which warns; only CPU float32 and float64 types are accepted)."""
    warnings.warn(
        "torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use torch.set_default_dtype() and "
        "torch.set_default_device() as alternatives.",
        UserWarning,
        stacklevel=2,
    )
    name = t if isinstance(t, str) else f"torch.{getattr(t, '__name__', '')}"
    if name not in _typeinfo.LEGACY_NAMES:
        raise TypeError(f"invalid type: '{t}'")
    d, device_type = _typeinfo.LEGACY_NAMES[name]
    if device_type != "cpu":
        raise TypeError("numbagrad has no default device: only CPU tensor types can be the default")
    if not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    _types.set_default_dtype(d)


@declare
def set_float32_matmul_precision(precision: str) -> None:
    """Record the float32 matmul precision a program asks for (``"highest"``, ``"high"``, ``"medium"``); numbagrad
    computes float32 products in float32 whatever it is, as torch does on CPUs without bfloat16 units."""
    if precision not in ("highest", "high", "medium"):
        warnings.warn(
            f"{precision} is not one of 'highest', 'high', or 'medium'; the current setFloat32MatmulPrecision call "
            "has no effect.",
            UserWarning,
            stacklevel=2,
        )
        return
    _settings["matmul_precision"] = precision


@declare
def get_float32_matmul_precision() -> str:
    """The float32 matmul precision last set (``"highest"`` by default)."""
    return _settings["matmul_precision"]


@declare
def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Record whether the program asks for deterministic algorithms (numbagrad's CPU kernels are deterministic;
    ``are_deterministic_algorithms_enabled`` reads the flag back)."""
    if not isinstance(mode, bool):
        raise TypeError(
            f"_set_deterministic_algorithms(): argument 'mode' (position 1) must be bool, not {type(mode).__name__}"
        )
    _settings["deterministic"], _settings["deterministic_warn_only"] = mode, bool(warn_only)


@declare
def are_deterministic_algorithms_enabled() -> bool:
    """Whether ``use_deterministic_algorithms(True)`` is in force."""
    return _settings["deterministic"]


@declare
def set_warn_always(b: bool) -> None:
    """Record whether warnings torch gives once per process should be given every time."""
    _settings["warn_always"] = bool(b)


@declare
def is_warn_always_enabled() -> bool:
    """Whether ``set_warn_always(True)`` is in force."""
    return _settings["warn_always"]


@declare
def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Switch anomaly mode on or off in this thread (as ``autograd.set_detect_anomaly``, without a context)."""
    grad_state.anomaly, grad_state.anomaly_check_nan = bool(enabled), bool(check_nan)


declare(grad_mode.is_anomaly_check_nan_enabled)


# --- predicates and the real-tensor forms of the complex functions --------------------------------------------------
@declare
def typename(obj) -> str:
    """The type's name as torch prints it: ``"torch.FloatTensor"`` for a tensor, else the Python class's name."""
    if isinstance(obj, Tensor):
        return obj.type()
    cls = type(obj)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


@declare
def is_storage(obj) -> bool:
    """False: numbagrad tensors keep their data in numpy or device arrays, not in storage objects."""
    return False


@declare(methods=True)
def is_signed(input: Tensor) -> bool:  # noqa: A002
    """Whether ``input``'s dtype holds negative numbers (floats and signed integers)."""
    return input.dtype.is_signed


@declare(methods=True)
def is_nonzero(input: Tensor) -> bool:  # noqa: A002
    """Whether a one-element tensor is not zero (torch's error for any other size)."""
    if input.numel() == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if input.numel() > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input._host().reshape(-1)[0] != 0)


@declare(methods=True)
def is_same_size(input: Tensor, other: Tensor) -> bool:  # noqa: A002
    """Whether the two tensors have the same shape."""
    return tuple(input.shape) == tuple(other.shape)


@declare
def can_cast(from_: _types.dtype, to: _types.dtype) -> bool:
    """Whether torch's type promotion allows casting ``from_`` to ``to`` (no complex to real, no float to integer, no
    number to bool)."""

    def kind(d):
        return 0 if d == _types.bool_ else (3 if d.is_complex else 2 if d.is_floating_point else 1)

    return kind(from_) <= kind(to)


@declare(methods=True)
def is_complex(input: Tensor) -> bool:  # noqa: A002
    """Whether ``input``'s dtype is complex (complex64 or complex128)."""
    return input._data.dtype.kind == "c"


@declare(methods=True)
def is_conj(input: Tensor) -> bool:  # noqa: A002
    """Whether ``input`` is a lazily conjugated view (what ``conj()`` of a complex tensor returns)."""
    return complex_ops.is_conj(input)


@declare(methods=True)
def is_neg(input: Tensor) -> bool:  # noqa: A002
    """False: numbagrad tensors never carry a lazy negation."""
    return False


@declare(samples=(Sample(T(3)),))
def isreal(input: Tensor) -> Tensor:  # noqa: A002
    """Whether each element is real: true everywhere for a real tensor, where the imaginary part is 0 for a
    complex one."""
    if input._data.dtype.kind == "c":
        return complex_ops.imag(input) == 0
    return creation.ones(input.shape, dtype=_types.bool_, device=input.device)


@declare
def real(input: Tensor) -> Tensor:  # noqa: A002
    """The real parts of a complex tensor as a view sharing its storage; a real tensor itself."""
    return complex_ops.real(input)


@declare
def imag(input: Tensor) -> Tensor:  # noqa: A002
    """The imaginary parts of a complex tensor as a view sharing its storage (torch's error for a real one)."""
    return complex_ops.imag(input)


@declare(methods=True)
def conj(input: Tensor) -> Tensor:  # noqa: A002
    """The conjugate: a lazy view of a complex tensor (``is_conj()``, see ``ops.complex_ops``); a real tensor
    itself."""
    return complex_ops.conj(input)


@declare(methods=True)
def resolve_conj(input: Tensor) -> Tensor:  # noqa: A002
    """A conjugate view's values in a tensor of its own; any other tensor itself."""
    return complex_ops.resolve_conj(input)


@declare(methods=True)
def resolve_neg(input: Tensor) -> Tensor:  # noqa: A002
    """``input`` itself: numbagrad tensors carry no lazy negation to resolve."""
    return input


@declare(methods=True)
def conj_physical(input: Tensor) -> Tensor:  # noqa: A002
    """The conjugate in a new tensor (a copy of a real tensor)."""
    return complex_ops.conj_physical(input)


@declare(methods=("conj_physical_",))
def conj_physical_(input: Tensor) -> Tensor:  # noqa: A002
    """Conjugate ``input`` in place (nothing to write for a real tensor)."""
    inplace.check_inplace(input)
    if input._data.dtype.kind != "c":
        return input
    return inplace.write_inplace(input, complex_ops.conj_physical)


@declare(methods=True, samples=(Sample(T(2, 3)), Sample(T(2, 3, 4))))
def adjoint(input: Tensor) -> Tensor:  # noqa: A002
    """The conjugate transpose: the last two dims swapped, a complex tensor lazily conjugated."""
    if input.dim() < 2:
        raise RuntimeError(
            f"tensor.adjoint() is only supported on matrices or batches of matrices. Got {input.dim()}-D tensor."
        )
    return complex_ops.conj(input.transpose(-2, -1))


@declare(methods=True)
def positive(input: Tensor) -> Tensor:  # noqa: A002
    """``input`` itself (unary plus); refused for bool tensors, as torch does."""
    if input.dtype == _types.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


@declare(methods=True)
def get_device(input: Tensor) -> int:  # noqa: A002
    """The CUDA device index of ``input``, or -1 for a CPU tensor."""
    return -1 if input.is_cpu else input.device.index or 0


# --- math -----------------------------------------------------------------------------------------------------------
@declare(methods=True)
def cov(input: Tensor, *, correction: int = 1, fweights=None, aweights=None) -> Tensor:  # noqa: A002
    """The covariance matrix of the variables in the rows (observations in the columns), with frequency and
    observation weights (``Tensor.cov``'s implementation)."""
    return tensor_methods.cov(input, correction=correction, fweights=fweights, aweights=aweights)


@declare(methods=True)
def corrcoef(input: Tensor) -> Tensor:  # noqa: A002
    """Pearson correlation coefficients of the variables in the rows (``Tensor.corrcoef``'s implementation)."""
    return tensor_methods.corrcoef(input)


@declare(methods=True)
def dist(input: Tensor, other: Tensor, p=2) -> Tensor:  # noqa: A002
    """The ``p``-norm of ``input - other`` (broadcast), over all elements."""
    return reduction.norm(input - other, p)


@declare
def frobenius_norm(input: Tensor, dim=(-2, -1), keepdim: bool = False) -> Tensor:  # noqa: A002
    """The square root of the sum of squares over ``dim``."""
    warnings.warn(
        "at::frobenius_norm is deprecated and it is just left for JIT compatibility. It will be removed in a future "
        "PyTorch release. Please use `linalg.vector_norm(A, 2., dim, keepdim)` instead",
        UserWarning,
        stacklevel=2,
    )
    return reduction.norm(input, 2, [dim] if isinstance(dim, int) else list(dim), keepdim)


@declare
def nuclear_norm(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A002
    """The sum of the singular values of the matrices over ``dim`` (the last two dims; ``nuclear_norm(A, True)``
    is torch's overload taking only ``keepdim``)."""
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    if dim is None:
        if input.dim() != 2:
            raise RuntimeError(f"nuclear_norm: Expected a 2D tensor, but got {input.dim()}D")
        dim = (-2, -1)
    warnings.warn(
        "at::nuclear_norm is deprecated and it is just left for JIT compatibility. It will be removed in a future "
        "PyTorch release. Please use `linalg.matrix_norm(A, 'nuc', dim, keepdim)` instead",
        UserWarning,
        stacklevel=2,
    )
    return linalg_functions.matrix_norm(input, "nuc", tuple(dim), keepdim)


@declare
def norm_except_dim(v: Tensor, pow: int = 2, dim: int = 0) -> Tensor:  # noqa: A002
    """The ``pow``-norm over every dim but ``dim``, keeping them as size 1 (weight normalization's norm); with
    ``dim=-1``, the norm of all elements."""
    if dim == -1:
        return reduction.norm(v, pow)
    d = wrap_dim(dim, v.dim())
    return reduction.norm(v, pow, [k for k in range(v.dim()) if k != d], keepdim=True)


@declare(methods=True, samples=(Sample(T(4, 3)),))
def msort(input: Tensor) -> Tensor:  # noqa: A002
    """``input`` sorted along its first dim."""
    return indexing.sort(input, 0)[0]


@declare
def trapz(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """The trapezoidal rule (torch's older name of ``trapezoid``)."""
    return more.trapezoid(y, x, dx=dx, dim=dim)


class Nextafter(Function):
    """The next floating point value after ``input`` towards ``other``. torch differentiates it as a step of no
    size: the gradient passes to ``input`` unchanged, and ``other`` gets zeros."""

    node_name = "NextafterBackward0"

    @staticmethod
    def forward(ctx, input: Tensor, other) -> Tensor:  # noqa: A002
        result_dtype = _common.result_type(input, other)
        if not result_dtype.is_floating_point:
            raise RuntimeError(f"\"nextafter_cpu\" not implemented for '{_typeinfo.CPP_NAMES[result_dtype.name]}'")
        a = input._host().astype(result_dtype.numpy)
        b = np.asarray(other._host() if isinstance(other, Tensor) else other, dtype=result_dtype.numpy)
        return Tensor._make(np.nextafter(a, b)).to(input.device)

    @staticmethod
    def backward(ctx, g: Tensor):
        return g, g * 0 if ctx.needs_input_grad[1] else None


@declare(methods=True, samples=(Sample(T(3), T(3)), Sample(T(2, 3), T(3))))
def nextafter(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The next floating point value after ``input`` towards ``other``, in their promoted precision."""
    return Nextafter.apply(input, other)


@declare(methods=True)
def angle(input: Tensor) -> Tensor:  # noqa: A002
    """The argument of each (real) element: pi for negative numbers, 0 otherwise (NaN stays NaN); its gradient is
    zero."""
    if input._data.dtype.kind == "c":
        return complex_ops.angle_complex(input)
    x = input if input.is_floating_point() else input.to(_types.get_default_dtype())
    return (x < 0).to(x.dtype) * math.pi + x * 0


# --- windows --------------------------------------------------------------------------------------------------------
def _window(name: str, window_length: int, periodic: bool, dtype, device, requires_grad: bool, values) -> Tensor:
    """A window of ``window_length`` samples from ``values(n)`` (the symmetric window of ``n`` samples); a periodic
    window is the symmetric one of ``window_length + 1`` samples without its last."""
    d = creation._dtype_or_default(dtype)
    if not d.is_floating_point:
        raise RuntimeError(
            f"{name} expects floating point dtypes, got: TensorOptions(dtype={_typeinfo.CPP_NAMES[d.name]}, "
            "device=cpu, layout=Strided (default), requires_grad=false (default), pinned_memory=false, "
            "memory_format=(nullopt))"
        )
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    if window_length <= 1:
        return creation._finish(np.ones(window_length, d.numpy), device, requires_grad)
    n = window_length + 1 if periodic else window_length
    return creation._finish(np.asarray(values(n)[:window_length], d.numpy), device, requires_grad)


def _cosine_sum(n: int, *coefficients: float) -> np.ndarray:
    """``sum_k (-1)^k a_k cos(2 pi k i / (n - 1))``: the Hann, Hamming and Blackman windows."""
    phase = 2 * np.pi * np.arange(n) / (n - 1)
    return sum((-1) ** k * a * np.cos(k * phase) for k, a in enumerate(coefficients))


@declare
def hann_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                pin_memory: bool = False, requires_grad: bool = False) -> Tensor:  # fmt: skip
    """The Hann window ``0.5 - 0.5 cos(2 pi i / (N - 1))``."""
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n: _cosine_sum(n, 0.5, 0.5))  # fmt: skip


@declare
def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *,
                   dtype=None, layout=None, device=None, pin_memory: bool = False,
                   requires_grad: bool = False) -> Tensor:  # fmt: skip
    """The Hamming window ``alpha - beta cos(2 pi i / (N - 1))``."""
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n: _cosine_sum(n, alpha, beta))  # fmt: skip


@declare
def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    pin_memory: bool = False, requires_grad: bool = False) -> Tensor:  # fmt: skip
    """The Blackman window ``0.42 - 0.5 cos(2 pi i / (N - 1)) + 0.08 cos(4 pi i / (N - 1))``."""
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n: _cosine_sum(n, 0.42, 0.5, 0.08))  # fmt: skip


@declare
def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    pin_memory: bool = False, requires_grad: bool = False) -> Tensor:  # fmt: skip
    """The Bartlett (triangular) window ``1 - |2 i / (N - 1) - 1|``."""
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n: 1 - np.abs(2 * np.arange(n) / (n - 1) - 1))  # fmt: skip


@declare
def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype=None, layout=None,
                  device=None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:  # fmt: skip
    """The Kaiser window ``I0(beta sqrt(1 - (2 i / (N - 1) - 1)^2)) / I0(beta)``."""
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n: np.kaiser(n, beta))  # fmt: skip


# --- creation -------------------------------------------------------------------------------------------------------
@declare
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory: bool = False,
                  requires_grad: bool = False) -> Tensor:  # fmt: skip
    """A 0-dim tensor holding ``s``, of the default float dtype unless ``dtype`` says otherwise."""
    return creation.full((), s, dtype=creation._dtype_or_default(dtype), device=device, requires_grad=requires_grad)


@declare
def frombuffer(buffer, *, dtype, count: int = -1, offset: int = 0, requires_grad: bool = False) -> Tensor:
    """A 1-D tensor over the memory of an object exposing the buffer protocol (shared, not copied), from byte
    ``offset``, ``count`` elements (-1: all that fit)."""
    d = to_dtype(dtype)
    size = memoryview(buffer).nbytes
    if offset < 0 or offset >= size:
        raise ValueError(f"both buffer length ({size}) and offset ({offset}) must be greater than 0")
    if count == 0 or count < -1:
        raise ValueError(f"expected 'count' to be either -1 or a positive number, but got {count}")
    if count == -1 and (size - offset) % d.itemsize:
        raise ValueError(
            f"buffer length ({size - offset} bytes) after offset ({offset} bytes) must be a multiple of element size "
            f"({d.itemsize})"
        )
    if count > 0 and (size - offset) < count * d.itemsize:
        raise ValueError(
            f"requested buffer length ({count} * {d.itemsize} bytes) after offset ({offset} bytes) must not be "
            f"greater than actual buffer length ({size} bytes)"
        )
    return creation._leaf(np.frombuffer(buffer, dtype=d.numpy, count=count, offset=offset), requires_grad)


@declare
def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, pin_memory: bool = False,
                   requires_grad: bool = False) -> Tensor:  # fmt: skip
    """An uninitialised tensor of ``size`` whose dims lie in memory in the order ``physical_layout`` (outermost
    first): ``empty_permuted((N, C, H, W), (0, 2, 3, 1))`` is channels-last."""
    size, order = tuple(int(s) for s in size), tuple(int(p) for p in physical_layout)
    if sorted(order) != list(range(len(size))):
        raise RuntimeError(f"Dimension order {list(order)} is not a permutation of the dimensions of {list(size)}")
    d = creation._dtype_or_default(dtype)
    physical = np.empty(tuple(size[p] for p in order), d.numpy)
    return _strided_leaf(physical.transpose(np.argsort(order)), device, requires_grad)


def _strided_leaf(data: np.ndarray, device, requires_grad: bool) -> Tensor:
    """A leaf over ``data`` keeping its strides: CPU storage is the numpy array itself; moving to another device
    makes a contiguous copy (the device backends allocate their own layout)."""
    if device is None or _types.to_device(device).type == "cpu":
        return creation._leaf(data, requires_grad)
    return creation._finish(data, device, requires_grad)


@declare
def unravel_index(indices, shape) -> tuple:
    """The coordinates in a tensor of ``shape`` of each flat index (negative indices count from the end)."""
    if not isinstance(indices, Tensor):
        indices = creation.tensor(indices)
    if indices.is_floating_point() or indices.dtype == _types.bool_:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError("'shape' cannot have negative values, but got " + str(shape))
    flat = indices._host().astype(np.int64)
    total = math.prod(shape)
    if np.any((flat < -total) | (flat >= total)):
        raise ValueError("'indices' must be in range [-prod(shape), prod(shape))")
    flat = flat % total if total else flat
    coords = []
    for n in reversed(shape):
        coords.append(flat % n)
        flat = flat // n
    return tuple(Tensor._make(np.array(c, dtype=np.int64)).to(indices.device) for c in reversed(coords))


def _range(start, end, step=1, *, dtype=None, device=None, requires_grad: bool = False,
           pin_memory: bool = False) -> Tensor:  # fmt: skip
    """``start, start + step, ...`` up to and including ``end`` (deprecated by torch in favour of ``arange``),
    of the default float dtype unless ``dtype`` says otherwise."""
    warnings.warn(
        "torch.range is deprecated and will be removed in a future release because its behavior is inconsistent "
        "with Python's range builtin. Instead, use torch.arange, which produces values in [start, end).",
        UserWarning,
        stacklevel=2,
    )
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    d = creation._dtype_or_default(dtype)
    n = int(math.floor((end - start) / step)) + 1
    values = start + np.arange(n, dtype=np.float64) * step
    return creation._finish(values.astype(d.numpy), device, requires_grad)


_range.__name__ = _range.__qualname__ = "range"
declare(_range, name="range")  # (defined as ``_range``: this module uses Python's ``range``)


@declare
def fill(input: Tensor, value) -> Tensor:  # noqa: A002
    """A tensor like ``input`` filled with ``value`` (a number or a 0-dim tensor, differentiable)."""
    if isinstance(value, Tensor) and value.dim() != 0:
        raise RuntimeError(
            f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} dimensions."
        )
    if isinstance(value, Tensor):
        return value.to(input.dtype).expand(*input.shape).clone()
    return creation.full_like(input, value)


@declare
def binomial(count: Tensor, prob: Tensor, generator=None) -> Tensor:
    """Draws from Binomial(``count``, ``prob``) elementwise, as floats of ``count``'s dtype (not differentiable)."""
    if not count.is_floating_point():
        raise ValueError(f"binomial only supports floating-point dtypes for count, got: {count.dtype.scalar_name}")
    n, p = np.broadcast_arrays(count._host(), prob._host())
    draws = creation._rng_for(generator).binomial(n.astype(np.int64), p)
    return Tensor._make(draws.astype(count._data.dtype)).to(count.device)


def _shift(name: str, kernel, input, other) -> Tensor:
    """``input`` shifted by ``other`` bits (integers only), in the promoted dtype; a shift by the width or more
    gives 0 (or -1 for a right shift of a negative number), as torch's does."""
    if not isinstance(input, Tensor):
        input = creation.tensor(input, device=other.device)
    d = _common.result_type(input, other)
    if d.is_floating_point:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{_typeinfo.CPP_NAMES[d.name].title()}'")
    a = input._host().astype(d.numpy)
    b = np.asarray(other._host() if isinstance(other, Tensor) else other).astype(np.int64)
    bits = 8 * d.itemsize
    wide = np.clip(b, 0, bits - 1)
    result = kernel(a, wide.astype(d.numpy))
    if kernel is np.left_shift:
        result = np.where((b >= bits) | (b < 0), 0, result)
    else:
        result = np.where((b >= bits) | (b < 0), np.where(a < 0, -1, 0), result)
    return Tensor._make(np.ascontiguousarray(result.astype(d.numpy))).to(input.device)


@declare(methods=True)
def bitwise_left_shift(input, other) -> Tensor:  # noqa: A002
    """``input << other`` for integer tensors."""
    return _shift("lshift", np.left_shift, input, other)


@declare(methods=True)
def bitwise_right_shift(input, other) -> Tensor:  # noqa: A002
    """``input >> other`` (arithmetic) for integer tensors."""
    return _shift("rshift", np.right_shift, input, other)


def _binary_inplace(op, name: str) -> None:
    """``t.<name>_(other)``: ``op(t, other)`` written into ``t``; first torch's check that the promoted dtype can be
    cast to ``t``'s (an int tensor shifted by a float refuses the cast before the op looks at the dtype)."""

    def method(input: Tensor, other) -> Tensor:  # noqa: A002
        inplace.check_result(input, _common.result_type(input, other).numpy, input._data.shape)
        operands = (other,) if isinstance(other, Tensor) else ()
        return inplace.write_inplace(input, lambda x: op(x, other), operands)

    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"In-place ``{name}``: the result written into this tensor, in its dtype."
    declare(method, methods=(name + "_",), name=f"_{name}_", differentiable=False)


for _name in ("bitwise_left_shift", "bitwise_right_shift", "nextafter"):
    _binary_inplace(globals()[_name], _name)


_histogram_result = more._named_pair("histogram", "hist", "bin_edges")
_histogramdd_result = more._named_pair("histogramdd", "hist", "bin_edges")


def _check_histogram_input(name: str, input: Tensor) -> None:  # noqa: A002
    if not input.is_floating_point():
        raise NotImplementedError(f"\"{name}\" not implemented for '{input.dtype.scalar_name.replace('Tensor', '')}'")


@declare(methods=True)
def histogram(input: Tensor, bins=100, *, range=None, weight=None, density: bool = False):  # noqa: A002
    """Counts of ``input``'s elements in ``bins`` equal bins over ``range`` (default: the data's min and max), or
    between the given increasing edges; ``weight`` weighs each element, ``density`` normalizes to a density."""
    _check_histogram_input("histogramdd", input)
    data = input._host().reshape(-1)
    edges = bins._host() if isinstance(bins, Tensor) else int(bins)
    w = weight._host().reshape(-1) if weight is not None else None
    if range is None and not isinstance(bins, Tensor) and data.size == 0:
        range = (0.0, 1.0)
    hist, bin_edges = np.histogram(data, edges, range=range, weights=w, density=density)
    dt = input._data.dtype
    return _histogram_result(
        Tensor._make(hist.astype(dt)).to(input.device), Tensor._make(bin_edges.astype(dt)).to(input.device)
    )


@declare
def histogramdd(input: Tensor, bins=10, range=None, weight=None, density: bool = False):  # noqa: A002
    """The histogram of the points in ``input``'s rows (the last dim holds the coordinates): ``bins`` per dim (an
    int for all, a list of ints, or a list of edge tensors), ``range`` a flat ``(min0, max0, min1, max1, ...)``."""
    _check_histogram_input("histogramdd", input)
    points = input._host().reshape(-1, input.shape[-1])
    k = points.shape[1]
    if isinstance(bins, (list, tuple)) and bins and isinstance(bins[0], Tensor):
        bin_spec = [b._host() for b in bins]
    else:
        bin_spec = [int(bins)] * k if isinstance(bins, (int, np.integer)) else [int(b) for b in bins]
    ranges = None if range is None else [(range[2 * i], range[2 * i + 1]) for i in builtins.range(k)]
    w = weight._host().reshape(-1) if weight is not None else None
    hist, edges = np.histogramdd(points, bin_spec, range=ranges, weights=w, density=density)
    dt = input._data.dtype
    return _histogramdd_result(
        Tensor._make(np.ascontiguousarray(hist.astype(dt))).to(input.device),
        tuple(Tensor._make(e.astype(dt)).to(input.device) for e in edges),
    )


@declare(methods=True)
def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:  # noqa: A002
    """A copy with ``source`` written (or added) at the flat positions ``index`` (``Tensor.put``'s
    implementation)."""
    return tensor_methods.put(input, index, source, accumulate)


@declare(methods=("put_",), name="_put_")
def put_(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:  # noqa: A002
    """In-place ``put`` (``Tensor.put_``'s implementation)."""
    return tensor_methods.put_(input, index, source, accumulate)


@declare(methods=True)
def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:  # noqa: A002
    """``nonzero()``'s rows, cut or padded with ``fill_value`` to exactly ``size`` rows (``Tensor.nonzero_static``'s
    implementation)."""
    return tensor_methods.nonzero_static(input, size=size, fill_value=fill_value)


@declare
def from_file(filename: str, shared=None, size: int = 0, *, dtype=None, layout=None, device=None,
              pin_memory: bool = False, requires_grad: bool = False) -> Tensor:  # fmt: skip
    """A 1-D tensor of ``size`` elements read from the raw bytes of ``filename``; with ``shared=True`` the tensor
    maps the file, and writes to it reach the file."""
    d = creation._dtype_or_default(dtype)
    if shared:
        data = np.memmap(filename, dtype=d.numpy, mode="r+", shape=(int(size),))
        return _strided_leaf(data, device, requires_grad)
    nbytes = int(size) * d.itemsize
    with open(filename, "rb") as f:
        raw = f.read(nbytes)
    if len(raw) < nbytes:
        raise RuntimeError(f"unexpected EOF, expected {nbytes - len(raw)} more bytes. The file might be corrupted.")
    return creation._finish(np.frombuffer(raw, dtype=d.numpy).copy(), device, requires_grad)


# --- gradient -------------------------------------------------------------------------------------------------------
def _edge_weights(h0, h1, left: bool):
    """Second-order one-sided difference weights at an edge, for the spacings ``h0`` (nearest the edge) and
    ``h1`` (numpy's and torch's formula)."""
    if left:
        return -(2 * h0 + h1) / (h0 * (h0 + h1)), (h0 + h1) / (h0 * h1), -h0 / (h1 * (h0 + h1))
    return h1 / (h0 * (h0 + h1)), -(h0 + h1) / (h0 * h1), (2 * h1 + h0) / (h1 * (h0 + h1))


def _gradient_along(f: Tensor, d: int, coords, edge_order: int) -> Tensor:
    """The derivative of ``f`` along dim ``d``: central differences inside (exact for quadratics on uneven
    ``coords``), one-sided ones of ``edge_order`` at the two ends. ``coords`` is a float spacing or a 1-D tensor
    of the sample coordinates."""
    n = f.shape[d]

    def part(start, length=1):
        return shape.narrow(f, d, start, length)

    def along(v: Tensor) -> Tensor:  # a 1-D tensor of length n-2 (or 1) broadcast along dim d
        return v.reshape([-1 if k == d else 1 for k in builtins.range(f.dim())])

    if isinstance(coords, Tensor):
        h = coords[1:] - coords[:-1]
        hl, hr = h[:-1], h[1:]
        inner = (along(hl * hl) * part(2, n - 2) - along(hr * hr) * part(0, n - 2)
                 + along(hr * hr - hl * hl) * part(1, n - 2)) / along(hl * hr * (hl + hr))  # fmt: skip
        first, last, second, before_last = h[0], h[-1], h[1] if n > 2 else h[0], h[-2] if n > 2 else h[-1]
    else:
        inner = (part(2, n - 2) - part(0, n - 2)) / (2 * coords)
        first = last = second = before_last = coords
    if edge_order == 1:
        left = (part(1) - part(0)) / first
        right = (part(n - 1) - part(n - 2)) / last
    else:
        a, b, c = _edge_weights(first, second, left=True)
        left = part(0) * a + part(1) * b + part(2) * c
        a, b, c = _edge_weights(before_last, last, left=False)
        right = part(n - 3) * a + part(n - 2) * b + part(n - 1) * c
    return shape.cat([left, inner, right], d)


@declare
def gradient(input: Tensor, *, spacing=1, dim=None, edge_order: int = 1) -> tuple:  # noqa: A002
    """The derivative of ``input`` along each dim in ``dim`` (all by default) by finite differences: ``spacing``
    is one step for all dims, a step per dim, or a tensor of sample coordinates per dim."""
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    dims = (
        list(builtins.range(input.dim()))
        if dim is None
        else [wrap_dim(dim, input.dim())]
        if isinstance(dim, int)
        else [wrap_dim(k, input.dim()) for k in dim]
    )
    if spacing is None:
        spacing = 1
    steps = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    if len(steps) == 1 and len(dims) > 1 and not isinstance(steps[0], Tensor):
        steps = steps * len(dims)
    if len(steps) != len(dims):
        raise RuntimeError(
            f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim arguments to have "
            f"the same length, but got a spacing argument of length {len(steps)} and a dim argument of length "
            f"{len(dims)}."
        )
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
    f = input if input.is_floating_point() else input.to(_types.get_default_dtype())
    return tuple(
        _gradient_along(f, d, s.to(f.dtype) if isinstance(s, Tensor) else float(s), edge_order)
        for d, s in zip(dims, steps)
    )


# --- legacy linear algebra: torch's removed functions raise, the deprecated ones forward to torch.linalg ---------
def _removed(name: str, message: str):
    def function(*args, **kwargs):
        raise RuntimeError(message)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = "Removed from torch (since 1.9): raises torch's RuntimeError naming the ``torch.linalg`` " \
        "replacement."  # fmt: skip
    return function


_REMOVED_SINCE_1_9 = "This function was deprecated since version 1.9 and is now removed."
_REMOVED_MESSAGES = {
    "matrix_rank": f"{_REMOVED_SINCE_1_9}\nPlease use the `torch.linalg.matrix_rank` function instead. The parameter "
    "'symmetric' was renamed in `torch.linalg.matrix_rank()` to 'hermitian'.",
    "solve": f"{_REMOVED_SINCE_1_9} `torch.solve` is deprecated in favor of `torch.linalg.solve`. `torch.linalg.solve` "
    "has its arguments reversed and does not return the LU factorization.\n\nTo get the LU factorization see "
    "`torch.lu`, which can be used with `torch.lu_solve` or `torch.lu_unpack`.\nX = torch.solve(B, A).solution "
    "should be replaced with:\nX = torch.linalg.solve(A, B)",
    "lstsq": f"{_REMOVED_SINCE_1_9} "
    "`torch.lstsq` is deprecated in favor of `torch.linalg.lstsq`.\n`torch.linalg.lstsq` has "
    "reversed arguments and does not return the QR decomposition in the returned tuple (although it "
    "returns other information about the problem).\n\nTo get the QR decomposition consider using "
    "`torch.linalg.qr`.\n\nThe returned solution in `torch.lstsq` stored the residuals of the "
    "solution in the last m - n columns of the returned value whenever m > n. In "
    "torch.linalg.lstsq, the residuals are in the field 'residuals' of the returned named "
    "tuple.\n\nThe unpacking of the solution, as in\nX, _ = torch.lstsq(B, "
    "A).solution[:A.size(1)]\nshould be replaced with:\nX = torch.linalg.lstsq(A, B).solution",
    "symeig": f"{_REMOVED_SINCE_1_9} The default behavior has changed from using the upper triangular portion of the "
    "matrix by default to using the lower triangular portion.\n\nL, _ = torch.symeig(A, upper=upper) should be "
    "replaced with:\nL = torch.linalg.eigvalsh(A, UPLO='U' if upper else 'L')\n\nand\n\nL, V = torch.symeig(A, "
    "eigenvectors=True) should be replaced with:\nL, V = torch.linalg.eigh(A, UPLO='U' if upper else 'L')",
    "eig": f"{_REMOVED_SINCE_1_9} `torch.linalg.eig` returns complex tensors of dtype `cfloat` or `cdouble` rather "
    "than real tensors mimicking complex tensors.\n\nL, _ = torch.eig(A) should be replaced with:\nL_complex = "
    "torch.linalg.eigvals(A)\n\nand\n\nL, V = torch.eig(A, eigenvectors=True) should be replaced with:\nL_complex, "
    "V_complex = torch.linalg.eig(A)",
}
for _name, _message in _REMOVED_MESSAGES.items():
    declare(_removed(_name, _message))


# torch's Tensor methods of the removed functions, with their parameters: each raises the function's RuntimeError.
@declare(methods=("solve",), name="_solve_method", differentiable=False)
def _solve_method(self: Tensor, other: Tensor):
    """Removed from torch (since 1.9): raises, naming ``torch.linalg.solve``."""
    raise RuntimeError(_REMOVED_MESSAGES["solve"])


@declare(methods=("lstsq",), name="_lstsq_method", differentiable=False)
def _lstsq_method(self: Tensor, other: Tensor):
    """Removed from torch (since 1.9): raises, naming ``torch.linalg.lstsq``."""
    raise RuntimeError(_REMOVED_MESSAGES["lstsq"])


@declare(methods=("eig",), name="_eig_method", differentiable=False)
def _eig_method(self: Tensor, eigenvectors: bool = False):
    """Removed from torch (since 1.9): raises, naming ``torch.linalg.eig``."""
    raise RuntimeError(_REMOVED_MESSAGES["eig"])


@declare(methods=("symeig",), name="_symeig_method", differentiable=False)
def _symeig_method(self: Tensor, eigenvectors: bool = False):
    """Removed from torch (since 1.9): raises, naming ``torch.linalg.eigh``."""
    raise RuntimeError(_REMOVED_MESSAGES["symeig"])


@declare(methods=True)
def lu(A: Tensor, pivot: bool = True, get_infos: bool = False):
    """The LU factorization ``(LU, pivots[, infos])`` (deprecated by torch for ``torch.linalg.lu_factor``)."""
    warnings.warn(
        "torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex and will be removed in "
        "a future PyTorch release.",
        UserWarning,
        stacklevel=2,
    )
    # (torch's ``_lu_with_info`` factors a singular matrix without complaint: a zero pivot is reported in infos)
    LU, pivots, infos = linalg_functions.lu_factor_ex(A, pivot=pivot)
    return (LU, pivots, infos) if get_infos else (LU, pivots)


@declare(methods=True)
def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:
    """The solution of ``A X = b`` from ``A``'s LU factorization (``torch.linalg.lu_solve`` with its arguments in
    the older order)."""
    warnings.warn(
        "torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be removed in a future PyTorch "
        "release.\nNote that torch.linalg.lu_solve has its arguments reversed.",
        UserWarning,
        stacklevel=2,
    )
    return linalg_functions.lu_solve(LU_data, LU_pivots, b)


_triangular_solve_result = more._named_pair("triangular_solve", "solution", "cloned_coefficient")


@declare(methods=True)
def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False):  # fmt: skip
    """``(X, A.clone())`` with ``X`` solving ``A X = b`` (``A^T X = b`` with ``transpose``) for a triangular ``A``
    (deprecated by torch for ``torch.linalg.solve_triangular``)."""
    warnings.warn(
        "torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangularand will be removed in a "
        "future PyTorch release.",
        UserWarning,
        stacklevel=2,
    )
    matrix = A.transpose(-2, -1) if transpose else A
    solution = linalg_functions.solve_triangular(matrix, b, upper=upper != transpose, unitriangular=unitriangular)
    return _triangular_solve_result(solution, shape.clone(A))


@declare(methods=True)
def ormqr(input: Tensor, input2: Tensor, input3: Tensor, left: bool = True, transpose: bool = False) -> Tensor:  # noqa: A002
    """``Q @ input3`` (``input3 @ Q`` with ``left=False``, ``Q^T`` with ``transpose``) for the full orthogonal
    ``Q`` of the Householder reflectors in ``input`` and ``input2`` (``geqrf``'s output)."""
    m, k = input.shape[-2], input.shape[-1]
    if k < m:  # the full m x m Q: the missing reflectors are the identity (tau = 0)
        input = shape.cat(
            [input, creation.zeros((*input.shape[:-1], m - k), dtype=input.dtype, device=input.device)], -1
        )
        input2 = shape.cat(
            [
                input2,
                creation.zeros((*input2.shape[:-1], m - input2.shape[-1]), dtype=input2.dtype, device=input2.device),
            ],
            -1,
        )
    q = linalg_functions.householder_product(input[..., :m], input2)
    if transpose:
        q = q.transpose(-2, -1)
    return linalg.matmul(q, input3) if left else linalg.matmul(input3, q)


# --- distances ------------------------------------------------------------------------------------------------------
@declare
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str | None = None) -> Tensor:
    """The ``p``-norm distance between each row of ``x1`` (..., P, M) and each row of ``x2`` (..., R, M), as a
    (..., P, R) tensor; batch dims broadcast. Computed from the differences (``compute_mode`` names torch's
    matmul shortcut for large Euclidean problems, which gives the same distances up to rounding)."""
    if x1.dim() < 2 or x2.dim() < 2:
        bad, which = (x1, "X1") if x1.dim() < 2 else (x2, "X2")
        raise RuntimeError(f"cdist only supports at least 2D tensors, {which} got: {bad.dim()}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if compute_mode not in (None, "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist"):  # fmt: skip
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    differences = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return linalg_functions.vector_norm(differences, p, dim=-1)


# --- recurrent cells and layers with flat weight lists --------------------------------------------------------------
def _gates(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih, b_hh) -> tuple[Tensor, Tensor]:  # noqa: A002
    """The input and hidden projections ``input @ w_ih^T + b_ih`` and ``hx @ w_hh^T + b_hh``."""
    gi = linalg.matmul(input, w_ih.t())
    gh = linalg.matmul(hx, w_hh.t())
    if b_ih is not None:
        gi = gi + b_ih
    if b_hh is not None:
        gh = gh + b_hh
    return gi, gh


@declare
def lstm_cell(input: Tensor, hx, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None) -> tuple:  # noqa: A002
    """One LSTM step: ``(h', c')`` from ``hx = (h, c)``, with the gates in torch's order (input, forget, cell,
    output)."""
    h, c = hx
    gi, gh = _gates(input, h, w_ih, w_hh, b_ih, b_hh)
    i, f, g, o = shape.chunk(gi + gh, 4, -1)
    c_next = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c_next.tanh(), c_next


@declare
def gru_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None) -> Tensor:  # noqa: A002
    """One GRU step, with the gates in torch's order (reset, update, new) and the reset gate applied to the
    hidden projection (``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``)."""
    gi, gh = _gates(input, hx, w_ih, w_hh, b_ih, b_hh)
    ir, iz, in_ = shape.chunk(gi, 3, -1)
    hr, hz, hn = shape.chunk(gh, 3, -1)
    r, z = (ir + hr).sigmoid(), (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    return n + z * (hx - n)


@declare
def rnn_tanh_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None) -> Tensor:  # noqa: A002
    """One Elman RNN step with tanh: ``tanh(input @ w_ih^T + b_ih + hx @ w_hh^T + b_hh)``."""
    gi, gh = _gates(input, hx, w_ih, w_hh, b_ih, b_hh)
    return (gi + gh).tanh()


@declare
def rnn_relu_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None) -> Tensor:  # noqa: A002
    """One Elman RNN step with ReLU: ``relu(input @ w_ih^T + b_ih + hx @ w_hh^T + b_hh)``."""
    gi, gh = _gates(input, hx, w_ih, w_hh, b_ih, b_hh)
    return (gi + gh).relu()


def _recurrent(name: str, step, input: Tensor, states: list, params, has_biases: bool, num_layers: int,  # noqa: A002
               dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> tuple:  # fmt: skip
    """Run ``step`` (one cell: input, state tuple, weights -> state tuple, hidden first) over time, layer by layer
    and direction by direction; ``params`` hold each (layer, direction)'s ``w_ih, w_hh[, b_ih, b_hh]`` in turn,
    as torch's flat weight lists do. Returns the last layer's hidden states and each (layer, direction)'s final
    state."""
    if not isinstance(input, Tensor) or input.dim() != 3:
        raise RuntimeError(f"{name}: expected a 3-D input (the packed-sequence form is not supported)")
    directions = 2 if bidirectional else 1
    per_cell = 4 if has_biases else 2
    params = list(params)
    if len(params) != num_layers * directions * per_cell:
        raise RuntimeError(
            f"{name}: expected {num_layers * directions * per_cell} weights for {num_layers} layer(s), "
            f"{directions} direction(s) and has_biases={has_biases}, got {len(params)}"
        )
    x = input.transpose(0, 1) if batch_first else input
    steps = list(shape.unbind(x, 0))
    finals = []
    for layer in builtins.range(num_layers):
        outputs = []
        for direction in builtins.range(directions):
            k = layer * directions + direction
            weights = params[k * per_cell : (k + 1) * per_cell]
            w_ih, w_hh = weights[0], weights[1]
            b_ih, b_hh = (weights[2], weights[3]) if has_biases else (None, None)
            state = states[k]
            hidden = [None] * len(steps)
            order = builtins.range(len(steps) - 1, -1, -1) if direction else builtins.range(len(steps))
            for t in order:
                state = step(steps[t], state, w_ih, w_hh, b_ih, b_hh)
                hidden[t] = state[0]
            outputs.append(shape.stack(hidden, 0))
            finals.append(state)
        layer_out = shape.cat(outputs, -1) if directions == 2 else outputs[0]
        if dropout > 0 and train and layer < num_layers - 1:
            keep = creation.rand(layer_out.shape, dtype=layer_out.dtype, device=layer_out.device) >= dropout
            layer_out = layer_out * keep.to(layer_out.dtype) * (1.0 / (1.0 - dropout) if dropout < 1 else 0.0)
        steps = list(shape.unbind(layer_out, 0))
    out = shape.stack(steps, 0)
    return (out.transpose(0, 1) if batch_first else out), finals


@declare
def lstm(input: Tensor, hx, params, has_biases: bool, num_layers: int, dropout: float, train: bool,  # noqa: A002
         bidirectional: bool, batch_first: bool) -> tuple:  # fmt: skip
    """A multi-layer LSTM over a (time, batch, features) input (batch first with ``batch_first``) with torch's
    flat weight list: ``(output, h_n, c_n)``."""
    h0, c0 = hx
    states = [(h0[k], c0[k]) for k in builtins.range(h0.shape[0])]
    out, finals = _recurrent("lstm", lambda x, s, *w: lstm_cell(x, s, *w), input, states, params, has_biases,
                             num_layers, dropout, train, bidirectional, batch_first)  # fmt: skip
    return out, shape.stack([f[0] for f in finals], 0), shape.stack([f[1] for f in finals], 0)


def _single_state(name: str, cell):
    def function(input: Tensor, hx: Tensor, params, has_biases: bool, num_layers: int, dropout: float,  # noqa: A002
                 train: bool, bidirectional: bool, batch_first: bool) -> tuple:  # fmt: skip
        states = [(hx[k],) for k in builtins.range(hx.shape[0])]
        out, finals = _recurrent(name, lambda x, s, *w: (cell(x, s[0], *w),), input, states, params, has_biases,
                                 num_layers, dropout, train, bidirectional, batch_first)  # fmt: skip
        return out, shape.stack([f[0] for f in finals], 0)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = (
        f"A multi-layer {name.upper() if name == 'gru' else 'Elman RNN'} over a (time, batch, features) input with "
        f"torch's flat weight list (each layer and direction's ``w_ih, w_hh[, b_ih, b_hh]``): ``(output, h_n)``."
    )
    return function


declare(_single_state("gru", gru_cell))
declare(_single_state("rnn_tanh", rnn_tanh_cell))
declare(_single_state("rnn_relu", rnn_relu_cell))


# --- randomized low-rank decompositions -----------------------------------------------------------------------------
def _approximate_basis(A: Tensor, q: int, niter: int) -> Tensor:
    """An orthonormal (m, q) basis whose span nearly holds ``A``'s range: ``A`` times a random Gaussian matrix,
    refined by ``niter`` subspace iterations (Halko, Martinsson and Tropp 2009, algorithm 4.4)."""
    omega = creation.randn(A.shape[-1], q, dtype=A.dtype, device=A.device)
    basis = linalg_functions.qr(linalg.matmul(A, omega))[0]
    for _ in builtins.range(niter):
        basis = linalg_functions.qr(linalg.matmul(A.transpose(-2, -1), basis))[0]
        basis = linalg_functions.qr(linalg.matmul(A, basis))[0]
    return basis


@declare
def svd_lowrank(A: Tensor, q: int | None = 6, niter: int | None = 2, M: Tensor | None = None) -> tuple:
    """An approximate rank-``q`` SVD ``(U, S, V)`` of ``A - M`` (of batches too) by random projection: exact when
    ``A``'s rank is at most ``q``; ``A ~ U diag(S) V^T``. Differentiable through the QR and SVD it is made of."""
    q = 6 if q is None else q
    if M is not None:
        A = A - M.broadcast_to(A.shape)
    m, n = A.shape[-2], A.shape[-1]
    tall = A if m >= n else A.transpose(-2, -1)
    basis = _approximate_basis(tall, q, niter or 0)
    u, s, vh = linalg_functions.svd(linalg.matmul(basis.transpose(-2, -1), tall), full_matrices=False)
    u, v = linalg.matmul(basis, u), vh.transpose(-2, -1)
    return (u, s, v) if m >= n else (v, s, u)


@declare
def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True, niter: int = 2) -> tuple:
    """The principal components of ``A``'s rows by ``svd_lowrank`` of ``A`` less its column means (``center``):
    ``(U, S, V)``, the components in ``V``'s columns; ``q`` defaults to ``min(6, m, n)``."""
    m, n = A.shape[-2], A.shape[-1]
    if q is None:
        q = min(6, m, n)
    elif not (0 <= q <= min(m, n)):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}")
    if not niter >= 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if center:
        A = A - A.mean(-2, keepdim=True)
    return svd_lowrank(A, q, niter=niter)


# --- segment_reduce -------------------------------------------------------------------------------------------------
_SEGMENT_EMPTY = {"sum": 0.0, "prod": 1.0, "mean": math.nan, "amax": -math.inf, "amin": math.inf}


@declare
def segment_reduce(data: Tensor, reduce: str, *, lengths=None, indices=None, offsets=None, axis: int = 0,
                   unsafe: bool = False, initial=None) -> Tensor:  # fmt: skip
    """The ``reduce`` ("sum", "prod", "mean", "max", "min") of consecutive segments of ``data`` along ``axis``,
    the segments given by their ``lengths`` or by ``offsets`` (their boundaries), per row of the leading dims when
    those are N-D. An empty segment gives ``initial``, or the reduction's identity (NaN for a mean); ``initial``
    also joins every reduction (a mean adds it to the sum, not to the count). Made of ``scatter_reduce``, so it is
    differentiable the same way."""
    reduce = {"max": "amax", "min": "amin"}.get(reduce, reduce)
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if indices is not None:
        raise RuntimeError("segment_reduce(): indices based reduction is not supported yet.")
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined.")
    bounds = offsets if lengths is None else lengths
    name = "offsets" if lengths is None else "lengths"
    axis = wrap_dim(axis, data.dim())
    if axis != bounds.dim() - 1:
        raise RuntimeError(f"segment_reduce(): Expected axis to be the last dimension of {name} but got {axis}.")
    raw = bounds._host().astype(np.int64)
    sizes = np.diff(raw, axis=-1) if lengths is None else raw
    if np.any(sizes < 0):
        raise RuntimeError("lengths contains negative value!")
    n = data.shape[axis]
    if not unsafe and np.any(sizes.sum(-1) != n):
        raise RuntimeError(
            "segment_reduce(): Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) when "
            "!unsafe."
        )
    rows = sizes.reshape(-1, sizes.shape[-1])
    segments = sizes.shape[-1]
    ids = np.stack([np.repeat(np.arange(segments), row) for row in rows]).reshape(*sizes.shape[:-1], n)
    trailing = data.shape[axis + 1 :]
    index = np.broadcast_to(ids.reshape(ids.shape + (1,) * len(trailing)), tuple(data.shape))
    index_t = Tensor._make(np.ascontiguousarray(index)).to(data.device)
    out_shape = (*data.shape[:axis], segments, *trailing)
    start = _SEGMENT_EMPTY[reduce] if initial is None else initial
    base = creation.full(out_shape, start, dtype=data.dtype, device=data.device)
    if reduce == "mean" and initial is not None:
        total = tensor_methods.scatter_reduce(base, axis, index_t, data, "sum")
        counts = sizes.reshape(sizes.shape + (1,) * len(trailing)).astype(data._data.dtype)
        count_t = Tensor._make(np.ascontiguousarray(np.broadcast_to(counts, out_shape))).to(data.device)
        return indexing.where(count_t > 0, total / elementwise.clamp(count_t, min=1), base)
    return tensor_methods.scatter_reduce(base, axis, index_t, data, reduce, include_self=initial is not None)


# --- lobpcg ---------------------------------------------------------------------------------------------------------
def _b_orthonormal(S: Tensor, B, drop: float) -> Tensor:
    """A B-orthonormal basis of ``S``'s span (``S^T B S = I``), by the eigendecomposition of its scaled Gram matrix;
    directions with relative eigenvalue below ``drop`` (nearly dependent columns) are left out."""
    BS = S if B is None else linalg.matmul(B, S)
    gram = linalg.matmul(S.transpose(-2, -1), BS)
    scale = linalg.diagonal(gram).clamp(min=1e-300).rsqrt()
    values, vectors = linalg_functions.eigh(gram * scale.unsqueeze(0) * scale.unsqueeze(1))
    keep = np.nonzero(values._host() > drop * float(values._host().max()))[0]
    kept = Tensor._make(keep).to(S.device)
    basis = linalg.matmul(S * scale.unsqueeze(0), vectors[:, kept])
    return basis * values[kept].rsqrt().unsqueeze(0)


@declare
def lobpcg(A: Tensor, k: int | None = None, B=None, X=None, n: int | None = None, iK=None, niter: int | None = None,
           tol: float | None = None, largest: bool | None = None, method: str | None = None, tracker=None,
           ortho_iparams=None, ortho_fparams=None, ortho_bparams=None) -> tuple:  # fmt: skip
    """The ``k`` largest (or, with ``largest=False``, smallest) eigenpairs ``(E, X)`` of the symmetric problem
    ``A x = lambda B x`` by LOBPCG (Knyazev 2001): a block of ``n`` vectors improved by Rayleigh-Ritz over itself,
    its (preconditioned by ``iK``) residuals and its previous step, until the ``k`` wanted residuals fall below
    ``tol`` (default: the dtype's eps ** 0.5, relative to ``||A|| + |E| ||B||``) or ``niter`` steps (default 1000)
    pass. ``tracker`` is called with the state dict after each step; ``method`` and the ``ortho_*`` parameters
    tune torch's own orthogonalization and are accepted for its signature. The eigenvalues' gradient with respect
    to ``A`` is exact (``x x^T``); the eigenvectors' gradient is that of the converged subspace's Rayleigh-Ritz
    (it leaves out the part from outside the subspace)."""
    if A.dim() != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square matrix, got shape {list(A.shape)}")
    m = A.shape[0]
    k = (1 if X is None else X.shape[-1]) if k is None else k
    n = (k if X is None else X.shape[-1]) if n is None else n
    if m < 3 * n:
        raise ValueError(
            f"LOBPCG algorithm is not applicable when the number of A rows (={m}) is smaller than 3 x the number of "
            f"requested eigenpairs (={n})"
        )
    largest = True if largest is None else largest
    tol = float(np.finfo(A._data.dtype).eps) ** 0.5 if tol is None else tol
    niter = 1000 if niter is None or niter < 0 else niter
    drop = float(np.finfo(A._data.dtype).eps) * 10
    a_norm = float(reduction.norm(A.detach()).item())
    b_norm = 1.0 if B is None else float(reduction.norm(B.detach()).item())

    def ritz(S: Tensor) -> tuple[Tensor, Tensor]:
        """The Ritz values (wanted end first) and vectors' coefficients of ``A`` on the B-orthonormal ``S``."""
        values, coefficients = linalg_functions.eigh(linalg.matmul(S.transpose(-2, -1), linalg.matmul(A, S)))
        if largest:
            order = Tensor._make(np.arange(values.shape[0] - 1, -1, -1)).to(S.device)
            values, coefficients = values[order], coefficients[:, order]
        return values, coefficients

    X = creation.randn(m, n, dtype=A.dtype, device=A.device) if X is None else X
    S = _b_orthonormal(X, B, drop)
    E, C = ritz(S)
    X, P = linalg.matmul(S, C[:, :n]), None
    E = E[:n]
    for step in builtins.range(niter):
        BX = X if B is None else linalg.matmul(B, X)
        R = linalg.matmul(A, X) - BX * E.unsqueeze(0)
        residual = linalg_functions.vector_norm(R.detach(), 2, dim=0)._host()
        if tracker is not None:
            tracker({"iteration": step, "E": E, "X": X, "R": R})
        if np.all(residual[:k] <= tol * (a_norm + np.abs(E.detach()._host()[:k]) * b_norm)):
            break
        W = R if iK is None else linalg.matmul(iK, R)
        S = _b_orthonormal(shape.cat([X, W] if P is None else [X, W, P], 1), B, drop)
        values, C = ritz(S)
        X_next = linalg.matmul(S, C[:, :n])
        # the step's direction: the new vectors' part outside the old ones' span
        BX = X if B is None else linalg.matmul(B, X)
        P = X_next - linalg.matmul(X, linalg.matmul(BX.transpose(-2, -1), X_next))
        X, E = X_next, values[:n]
    # A last Rayleigh-Ritz with A's graph on the converged (constant) basis: the eigenvalues' gradient is then
    # exactly x x^T (not the iterations' approximation of it)
    basis = _b_orthonormal(X.detach(), None if B is None else B.detach(), drop)
    E, C = ritz(basis)
    return E[:k], linalg.matmul(basis, C)[:, :k]
