"""Shape ops: views (view, reshape, transpose, permute, squeeze, unsqueeze, expand) share storage and the
version counter with their base; cat, stack, clone, repeat and dtype/device moves copy.

The backward of a view only reshapes, permutes or sums the gradient: when nothing records it (no
``create_graph``, no forward-AD level: ``grad_mode.nothing_records``) it is built directly on the storage
(``_shape_back``) instead of going through ``Function.apply`` again.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .._tensor import Tensor, expose
from .._typeinfo import LEGACY_NAMES, _LegacyTensor, type_name
from .._types import Size, bfloat16, float16, int8, int16, to_device, to_dtype, uint8
from ..autograd.engine import accumulator_of
from ..autograd.function import BATCHING as _FUNCTION_BATCHING
from ..autograd.function import NO_GRAD_VIEW, NOT_A_TENSOR_INPUT, Function, _mark_view, edge_of, make_node
from ..autograd.grad_mode import nothing_records, state
from ..backend import _BY_TYPE as _BACKENDS
from ..backend import backend_for, for_device, layout
from . import complex_ops
from ._common import new_shell as _new
from ._common import result_np_dtype, same_backend, shape_str, wrap_dim
from ._registry import Call, Sample, T, declare
from .inplace import MULTI_OUTPUT_VIEW, _StaleView

_NEEDS_2 = (True, False)  # needs_input_grad of a view Function's node: the tensor, then its shape arguments
_NEEDS_3 = (True, False, False)


#: Tensor subclasses per type: may a view op build their view directly? Those derived straight from Tensor
#: (``nn.Parameter``, a user's subclass) make the same plain-Tensor view either way; a lazily conjugated tensor,
#: a view whose history went stale, or a mixin-built class (an uninitialized parameter) take ``apply``'s path.
_DIRECT_TYPES: dict = {Tensor: True, complex_ops.ConjView: False, _StaleView: False}


def _direct(x) -> bool:
    """Whether a view op may build its result and node itself (``_view_result``) instead of ``Function.apply``:
    a tensor of a plain type, no vmap, tracer (forward AD, compile, profiler), anomaly or inference mode to hand
    it to (nor saved-tensor hooks, which a view's node never calls: ``state.fast`` covers them with the rest)."""
    cls = type(x)
    plain = _DIRECT_TYPES.get(cls)
    if plain is None:
        plain = _DIRECT_TYPES[cls] = isinstance(x, Tensor) and cls.__mro__[1] is Tensor
    return plain and state.fast and _FUNCTION_BATCHING[0] is None  # (``fast``: one thread-local read for four)


def _view_result(cls, x: Tensor, data, needs: tuple):
    """The view of ``x`` over ``data`` and its ``cls`` node, built as ``_apply_simple`` builds them (edge, sequence
    number, the no-grad view mark) without ``apply``'s generic argument scan; returns ``(view, node or None)``,
    the caller records on the node what its backward reads. Only after ``_direct(x)``."""
    out = x._view_of(data)
    st = state
    if st.enabled:
        fn = x.grad_fn
        if (fn is not None or x._requires_grad) and data.dtype.kind in "fcV":
            ctx = cls._backward_cls()
            ctx.needs_input_grad = needs
            edge = (fn, x._output_nr) if fn is not None else (accumulator_of(x), 0)
            make_node(ctx, (edge,) + (NOT_A_TENSOR_INPUT,) * (len(needs) - 1), out)
            return out, ctx
    elif not st.in_forward:
        _mark_view(out, NO_GRAD_VIEW)
    return out, None


def _int_shape(shape: tuple, numel: int) -> tuple | None:
    """``shape`` when it is plain ints (one may be -1, resolved) that fit ``numel``; None for anything else (a
    list, a Size, numpy ints, an error), which the general path normalises and reports."""
    if not shape:
        return None  # (``view()``: torch's TypeError, from the general path)
    if len(shape) == 1 and type(shape[0]) is tuple:
        shape = shape[0]
    known, infer = 1, -1
    for i, s in enumerate(shape):  # (a loop: a comprehension costs a frame per call)
        if type(s) is not int:
            return None
        if s < 0:
            if s != -1 or infer >= 0:
                return None
            infer = i
        else:
            known *= s
    if infer < 0:
        return shape if known == numel else None
    if known == 0 or numel % known:
        return None
    return shape[:infer] + (numel // known,) + shape[infer + 1 :]


def _shape_arg(shape) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, Size)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def _infer_shape(shape: tuple, numel: int) -> tuple:
    """Resolve a single -1, with torch's error for shapes that do not fit."""
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape and known == 0:
        raise RuntimeError(
            f"cannot reshape tensor of 0 elements into shape {shape_str(shape)} because the unspecified dimension "
            "size -1 can be any value and is ambiguous"
        )
    fits = (known != 0 and numel % known == 0) if -1 in shape else known == numel
    if not fits:
        raise RuntimeError(f"shape '{shape_str(shape)}' is invalid for input of size {numel}")
    return tuple(numel // known if s == -1 else s for s in shape)


def _reshaped(g: Tensor, shape) -> Tensor:
    """``g`` reshaped for a view's backward: an op where something records it, else directly."""
    if not nothing_records(state):
        return g.reshape(shape)
    return Tensor._make(g._backend.reshape(g._data, tuple(shape)))


class View(Function):
    node_name = "ViewBackward0"
    _trusted = True
    _simple = True

    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x._data.shape
        return x._view_of(x._backend.reshape(x._data, shape))

    @staticmethod
    def backward(ctx, g):
        return _reshaped(g, ctx.in_shape), None


class ReshapeCopy(View):
    node_name = "UnsafeViewBackward0"

    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x._data.shape
        backend = x._backend
        return Tensor._make(backend.reshape(backend.copy(x._data), shape))


def _is_view_possible(data, shape) -> bool:
    return backend_for(data).can_view(data, shape)


def _contiguous_view(x: Tensor, shape: tuple) -> Tensor | None:
    """``view``'s and ``reshape``'s common call, built directly: plain int sizes of a contiguous tensor, always a
    view; None for anything else (the general path normalises the sizes and reports errors)."""
    data = x._data
    if data.flags.c_contiguous and _direct(x):
        size = _int_shape(shape, data.size)
        if size is not None:
            out, ctx = _view_result(View, x, x._backend.reshape(data, size), _NEEDS_2)
            if ctx is not None:
                ctx.in_shape = data.shape
            return out
    return None


@declare(
    methods=True,
    calls=(
        Call("view", lambda lib, a: a.view(3, 2), T(2, 3), node="ViewBackward0"),
        Call("view_infer", lambda lib, a: a.view(-1), T(2, 3), node="ViewBackward0"),
    ),
)
def view(x: Tensor, *shape) -> Tensor:
    """Same storage, new shape; fails (like torch) when the strides do not allow it."""
    out = _contiguous_view(x, shape)
    if out is not None:
        return out
    if not shape:
        raise TypeError(
            "view() received an invalid combination of arguments - got (), but expected one of:\n"
            " * (torch.dtype dtype)\n * (tuple of ints size)\n"
        )
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, Size, int)):
        return _view_as_dtype(x, to_dtype(shape[0]))
    shape = _infer_shape(_shape_arg(shape), x.numel())
    if not _is_view_possible(x._data, shape):
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension spans across "
            "two contiguous subspaces). Use .reshape(...) instead."
        )
    return View.apply(x, shape)


def _view_as_dtype(x: Tensor, d) -> Tensor:
    """torch's ``view(dtype)``: the same memory read as ``d`` (no gradient flows through it, as in torch). Between
    element sizes the last dim scales, so it must be contiguous and, growing, divisible, as must the offset and the
    other strides."""
    old, new = x.dtype.itemsize, d.itemsize
    size, stride, offset = list(x.shape), list(x.stride()), x.storage_offset()
    if old != new:
        what = f"to view {x.dtype.scalar_name} as {d.scalar_name} (different element sizes)"
        if x.dim() == 0:
            raise RuntimeError(f"self.dim() cannot be 0 {what}")
        if stride[-1] != 1:
            raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {stride[-1]}")
        if new > old:
            ratio = new // old
            if size[-1] % ratio:
                raise RuntimeError(f"self.size(-1) must be divisible by {ratio} {what}, but got {size[-1]}")
            if offset % ratio:
                raise RuntimeError(f"self.storage_offset() must be divisible by {ratio} {what}, but got {offset}")
            for k, s in enumerate(stride[:-1]):
                if s % ratio:
                    raise RuntimeError(f"self.stride({k}) must be divisible by {ratio} {what}, but got {s}")
            size[-1], stride, offset = size[-1] // ratio, [s // ratio for s in stride[:-1]] + [1], offset // ratio
        else:
            ratio = old // new
            size[-1], stride, offset = size[-1] * ratio, [s * ratio for s in stride[:-1]] + [1], offset * ratio
    backend = x._backend
    block = backend.storage_block(x._data, d.numpy)
    # (torch's view of another dtype aliases the memory and the version counter, but it is no autograd view: an
    # in-place change of it leaves the base's history alone; so its storage is handed out: ``expose``)
    expose(x)
    result = Tensor._make(backend.as_strided(block, tuple(size), tuple(stride), offset))
    result._version_counter = x._shared_version()
    return result


@declare(
    methods=True,
    samples=(Sample(T(3, 4), (4, 3)), Sample(T(2, 3, 4), (-1, 4))),
    calls=(
        Call("reshape", lambda lib, a: a.reshape(6), T(2, 3), node="ViewBackward0"),
        Call("reshape_copy", lambda lib, a: a.t().reshape(6), T(2, 3), node="UnsafeViewBackward0"),
    ),
)
def reshape(x: Tensor, *shape) -> Tensor:
    """A view when possible, else a copy (torch's two node names follow)."""
    out = _contiguous_view(x, shape)
    if out is not None:
        return out
    if not shape:
        raise TypeError('reshape() missing 1 required positional arguments: "shape"')
    shape = _infer_shape(_shape_arg(shape), x.numel())
    if shape == x.shape and x.grad_fn is None and not x.requires_grad:
        return View.apply(x, shape)
    return (View if _is_view_possible(x._data, shape) else ReshapeCopy).apply(x, shape)


@declare(
    methods=True,
    samples=(Sample(T(2, 3, 4)), Sample(T(2, 3, 4), 1)),
    calls=(
        Call("flatten", lambda lib, a: a.flatten(), T(2, 3), node="ViewBackward0"),
        Call("flatten_start", lambda lib, a: lib.flatten(a, 1), T(2, 3, 2), node="ViewBackward0"),
    ),
)
def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Flatten dims ``start_dim`` to ``end_dim`` into one (a view when possible, like ``reshape``)."""
    data = x._data
    n = data.ndim
    if type(start_dim) is int and type(end_dim) is int and n and -n <= start_dim < n and -n <= end_dim < n:
        s, e = start_dim % n, end_dim % n
        if s < e and data.flags.c_contiguous and _direct(x):  # the common call: a contiguous tensor, a view
            shape = data.shape
            out, ctx = _view_result(View, x, x._backend.reshape(data, shape[:s] + (math.prod(shape[s : e + 1]),)
                                    + shape[e + 1 :]), _NEEDS_2)  # fmt: skip
            if ctx is not None:
                ctx.in_shape = shape
            return out
    if x.dim() == 0:
        return reshape(x, 1)
    s, e = wrap_dim(start_dim, x.dim()), wrap_dim(end_dim, x.dim())
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return x
    shape = x.shape[:s] + (math.prod(x.shape[s : e + 1]),) + x.shape[e + 1 :]
    return reshape(x, shape)


def _int_permutation(dims: tuple, ndim: int) -> tuple | None:
    """``dims`` wrapped when they are plain ints naming each dim once; None for anything else (the general path
    normalises and reports)."""
    out = []
    for d in dims:  # (a loop: a comprehension costs a frame per call)
        if type(d) is not int or not -ndim <= d < ndim:
            return None
        out.append(d + ndim if d < 0 else d)
    if len(set(out)) != ndim:
        return None
    return tuple(out)


def _permuted(cls, x: Tensor, order: tuple) -> Tensor:
    """``cls.apply(x, order)`` for a permutation already checked, built directly (``_view_result``)."""
    out, ctx = _view_result(cls, x, x._data.transpose(order), _NEEDS_2)
    if ctx is not None:
        ctx.dims = order
    return out


class Permute(Function):
    node_name = "PermuteBackward0"
    _trusted = True
    _simple = True

    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims
        return x._view_of(x._data.transpose(dims))

    @staticmethod
    def backward(ctx, g):
        inverse = [0] * len(ctx.dims)
        for i, d in enumerate(ctx.dims):  # (a loop: cheaper than argsort on a few dims)
            inverse[d] = i
        inverse = tuple(inverse)
        if not nothing_records(state):
            return permute(g, inverse), None
        return Tensor._make(g._data.transpose(inverse)), None


class Transpose(Permute):
    node_name = "TransposeBackward0"


class MatrixTranspose(Permute):
    node_name = "TBackward0"


@declare(
    methods=True,
    samples=(Sample(T(2, 3, 4), (2, 0, 1)),),
    calls=(Call("permute", lambda lib, a: a.permute(2, 0, 1), T(2, 3, 2), node="PermuteBackward0"),),
)
def permute(x: Tensor, *dims) -> Tensor:
    """A view with the dims reordered as ``dims``."""
    data = x._data
    if len(dims) == data.ndim and _direct(x):  # the common call: distinct ints in range
        order = _int_permutation(dims, data.ndim)
        if order is not None:
            return _permuted(Permute, x, order)
    if not dims:
        raise TypeError('permute() missing 1 required positional arguments: "dims"')
    dims = _shape_arg(dims) if dims and not isinstance(dims[0], int) else tuple(dims)
    if len(dims) != x.dim():
        raise RuntimeError(
            "permute(sparse_coo): number of dimensions in the tensor input does not match the length of the desired "
            f"ordering of dimensions i.e. input.dim() = {x.dim()} is not equal to len(dims) = {len(dims)}"
        )
    dims = tuple(wrap_dim(d, x.dim()) for d in dims)
    if len(set(dims)) != len(dims):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return Permute.apply(x, dims)


@declare(
    methods=True,
    aliases=("swapaxes", "swapdims"),
    samples=(Sample(T(2, 3, 4), 0, 2),),
    calls=(Call("transpose", lambda lib, a: a.transpose(0, 2), T(2, 3, 2), node="TransposeBackward0"),),
)
def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """A view with dims ``dim0`` and ``dim1`` swapped (``swapaxes``/``swapdims`` are aliases)."""
    n = x._data.ndim
    if n == 0:
        return View.apply(x, ())
    d0, d1 = wrap_dim(dim0, n), wrap_dim(dim1, n)
    dims = list(range(n))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    if _direct(x):
        return _permuted(Transpose, x, tuple(dims))
    return Transpose.apply(x, tuple(dims))


swapaxes = swapdims = transpose


@declare(methods=True, samples=(Sample(T(3, 4)),), calls=(Call("t", lambda lib, a: a.t(), T(2, 3), node="TBackward0"),))
def t(x: Tensor) -> Tensor:
    """Transpose of a tensor of at most 2 dims (0-d and 1-d tensors are returned as views unchanged)."""
    if x.dim() > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.dim()}D")
    order = _REVERSED[x._data.ndim]
    if _direct(x):
        return _permuted(MatrixTranspose, x, order)
    return MatrixTranspose.apply(x, order)


_REVERSED = ((), (0,), (1, 0))  # t()'s permutation by rank


# --- the transpose properties: x.T, x.mT, x.H, x.mH (H and mH conjugate a complex tensor, lazily) ----------
def _deprecated_on_0d(name: str, advice: str, depth: int = 0) -> None:
    """torch's warning; ``depth``: frames between the property and this call, so it names the user's line."""
    warnings.warn(f"Tensor.{name} is deprecated on 0-D tensors. {advice}", UserWarning, stacklevel=3 + depth)


def _reversed_dims(x: Tensor) -> Tensor:
    """``x.T``: the dims reversed, a transpose for a matrix (torch deprecates other ranks, with a warning)."""
    n = x.dim()
    if n == 0:
        _deprecated_on_0d("T", "This function is the identity in these cases.")
    elif n != 2:
        warnings.warn(
            "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is deprecated and it will "
            "throw an error in a future release. Consider `x.mT` to transpose batches of matrices or "
            "`x.permute(*torch.arange(x.ndim - 1, -1, -1))` to reverse the dimensions of a tensor.",
            UserWarning,
            stacklevel=2,
        )
    return Permute.apply(x, tuple(reversed(range(n))))


def _matrix_transpose(x: Tensor, name: str = "mT", advice: str = "This function is the identity in these cases.",
                      depth: int = 0) -> Tensor:  # fmt: skip
    """``x.mT`` (and ``x.mH``): the last two dims swapped, for matrices and batches of matrices."""
    n = x.dim()
    if n == 0:
        _deprecated_on_0d(name, advice, depth)
        return x
    if n < 2:
        raise RuntimeError(f"tensor.{name} is only supported on matrices or batches of matrices. Got {n}-D tensor.")
    return transpose(x, -2, -1)


def _adjoint(x: Tensor) -> Tensor:
    """``x.H``: the conjugate transpose of a matrix (a real one's transpose)."""
    n = x.dim()
    if n == 0:
        _deprecated_on_0d("H", "Consider using x.conj().")
        return complex_ops.conj(x)
    if n != 2:
        hint = " For batches of matrices, consider using tensor.mH" if n > 2 else ""
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {n}-D tensor.{hint}")
    return complex_ops.conj(transpose(x, 0, 1))


def _matrix_adjoint(x: Tensor) -> Tensor:
    """``x.mH``: the conjugate of ``x.mT`` (with its own name in torch's messages)."""
    return complex_ops.conj(_matrix_transpose(x, "mH", "Consider using x.conj().", 1))


Tensor.T = property(_reversed_dims)
Tensor.mT = property(_matrix_transpose)
Tensor.H = property(_adjoint)
Tensor.mH = property(_matrix_adjoint)


class Squeeze(Function):
    node_name = "SqueezeBackward0"
    _trusted = True
    _simple = True

    @staticmethod
    def forward(ctx, x, dims):
        ctx.in_shape = x._data.shape
        return x._view_of(x._backend.reshape(x._data, tuple(s for i, s in enumerate(x.shape) if i not in dims)))

    @staticmethod
    def backward(ctx, g):
        return _reshaped(g, ctx.in_shape), None


class SqueezeDim(Squeeze):
    node_name = "SqueezeBackward1"


@declare(
    methods=True,
    samples=(Sample(T(3, 1, 4)), Sample(T(3, 1, 4), 1)),
    calls=(
        Call("squeeze", lambda lib, a: a.squeeze(), T(2, 1, 3), node="SqueezeBackward0"),
        Call("squeeze_dim", lambda lib, a: a.squeeze(1), T(2, 1, 3), node="SqueezeBackward1"),
    ),
)
def squeeze(x: Tensor, dim=None) -> Tensor:
    """A view without the size-1 dims (only those in ``dim`` when given: an int or a tuple)."""
    data = x._data
    if type(dim) is int and data.ndim and -data.ndim <= dim < data.ndim and _direct(x):  # one dim, built directly
        if dim < 0:
            dim += data.ndim
        shape = data.shape
        if shape[dim] == 1:
            shape = shape[:dim] + shape[dim + 1 :]
        out, ctx = _view_result(SqueezeDim, x, x._backend.reshape(data, shape), _NEEDS_2)
        if ctx is not None:
            ctx.in_shape = data.shape
        return out
    if dim is None:
        return Squeeze.apply(x, tuple(i for i, s in enumerate(x.shape) if s == 1))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    dims = tuple(wrap_dim(d, x.dim()) for d in dims)
    return SqueezeDim.apply(x, tuple(d for d in dims if x.dim() and x.shape[d] == 1))  # (0-d: dim 0 or -1, kept)


class Unsqueeze(Function):
    node_name = "UnsqueezeBackward0"
    _trusted = True
    _simple = True

    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim, ctx.in_shape = dim, x._data.shape
        shape = x._data.shape[:dim] + (1,) + x._data.shape[dim:]
        return x._view_of(x._backend.reshape(x._data, shape))

    @staticmethod
    def backward(ctx, g):
        if not nothing_records(state):
            return squeeze(g, ctx.dim), None
        return _reshaped(g, ctx.in_shape), None


@declare(
    methods=True,
    samples=(Sample(T(3, 4), 1), Sample(T(3, 4), -1)),
    calls=(
        Call("unsqueeze", lambda lib, a: a.unsqueeze(0), T(2, 3), node="UnsqueezeBackward0"),
        Call("unsqueeze_neg", lambda lib, a: lib.unsqueeze(a, -1), T(2, 3), node="UnsqueezeBackward0"),
    ),
)
def unsqueeze(x: Tensor, dim: int) -> Tensor:
    """A view with a new size-1 dim inserted at ``dim``."""
    data = x._data
    n = data.ndim + 1
    if type(dim) is int and -n <= dim < n and _direct(x):  # the common call, built directly
        if dim < 0:
            dim += n
        out, ctx = _view_result(Unsqueeze, x, x._backend.reshape(data, data.shape[:dim] + (1,) + data.shape[dim:]),
                                _NEEDS_2)  # fmt: skip
        if ctx is not None:
            ctx.dim, ctx.in_shape = dim, data.shape
        return out
    return Unsqueeze.apply(x, wrap_dim(dim, n))


class Expand(Function):
    node_name = "ExpandBackward0"
    _trusted = True  # (backward sums the gradient to the input's shape; dtype and device are the input's)

    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x._data.shape
        return x._view_of(x._backend.expand(x._data, shape))

    @staticmethod
    def backward(ctx, g):
        data = g._data
        direct = data.shape != ctx.in_shape and data.dtype.kind in "fc" and data.dtype.itemsize >= 4
        if direct and nothing_records(state):
            return Tensor._make(g._backend.sum_to_shape(data, ctx.in_shape)), None  # (a new array: the sum's)
        return g.sum_to_size(ctx.in_shape), None


def _expanded_shape(sizes: tuple, shape: tuple) -> tuple | None:
    """``expand``'s target for plain int ``sizes`` that fit ``shape`` (-1 keeps a dim), differing from ``shape``;
    None for anything else (the general path normalises, reports, or returns the tensor's alias)."""
    if len(sizes) == 1 and type(sizes[0]) is tuple:
        sizes = sizes[0]
    lead = len(sizes) - len(shape)
    if lead < 0:
        return None
    out = []
    for i, s in enumerate(sizes):  # (a loop: a comprehension costs a frame per call)
        if type(s) is not int:
            return None
        if i >= lead:
            old = shape[i - lead]
            if s == -1:
                s = old
            elif s != old and (old != 1 or s < 0):
                return None
        elif s < 0:
            return None
        out.append(s)
    out = tuple(out)
    return None if out == shape else out


@declare(methods=True, samples=(Sample(T(3, 1), (3, 4)), Sample(T(4), (2, 4))))
def expand(x: Tensor, *sizes) -> Tensor:
    """Broadcast to ``sizes`` without copying (-1 keeps a dimension)."""
    data = x._data
    if _direct(x):  # the common call, built directly
        shape = _expanded_shape(sizes, data.shape)
        if shape is not None:
            out, ctx = _view_result(Expand, x, x._backend.expand(data, shape), _NEEDS_2)
            if ctx is not None:
                ctx.in_shape = data.shape
            return out
    sizes = _shape_arg(sizes)
    if len(sizes) < x.dim():
        raise RuntimeError(
            f"expand(torch.FloatTensor{{{shape_str(x.shape)}}}, size={shape_str(sizes)}): the number of sizes "
            f"provided ({len(sizes)}) must be greater or equal to the number of dimensions in the tensor ({x.dim()})"
        )
    lead = len(sizes) - x.dim()
    for i in range(lead):
        if sizes[i] == -1:
            raise RuntimeError(
                f"The expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension {i}"
            )
    shape = tuple(x.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(sizes))
    for i, s in enumerate(x.shape):
        if s != 1 and s != shape[i + lead]:
            raise RuntimeError(
                f"The expanded size of the tensor ({shape[i + lead]}) must match the existing size ({s}) at "
                f"non-singleton dimension {i + lead}.  Target sizes: {shape_str(sizes)}.  Tensor sizes: "
                f"{shape_str(x.shape)}"
            )
    if shape == x.shape and not x.requires_grad and x._fw_grad is None:  # (a dual tensor: its tangent is expanded too)
        return x._view_of(x._data)
    return Expand.apply(x, shape)


@declare(methods=True, samples=(Sample(T(3, 1), (2, 3, 4)), Sample(T(4), (3, 4))))
def broadcast_to(x: Tensor, shape) -> Tensor:
    """``expand`` to ``shape``."""
    return expand(x, tuple(shape))


@declare(
    methods=("expand_as",),
    calls=(Call("expand_as", lambda lib, a, b: a.expand_as(b), T(3), T(2, 3), node="ExpandBackward0"),),
)
def expand_as(x: Tensor, other: Tensor) -> Tensor:
    """``expand`` to ``other``'s shape."""
    return expand(x, other.shape)


@declare(
    methods=("view_as",), calls=(Call("view_as", lambda lib, a, b: a.view_as(b), T(6), T(2, 3), node="ViewBackward0"),)
)
def view_as(x: Tensor, other: Tensor) -> Tensor:
    """``view`` with ``other``'s shape."""
    return view(x, other.shape)


@declare(methods=("reshape_as",))
def reshape_as(x: Tensor, other: Tensor) -> Tensor:
    """``reshape`` to ``other``'s shape."""
    return reshape(x, other.shape)


class Clone(Function):
    node_name = "CloneBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x):
        return Tensor._make(x._backend.copy(x._data))

    @staticmethod
    def backward(ctx, g):
        return g


class LayoutClone(Clone):
    """A copy laid out in a given axis order (``clone``/``contiguous`` with a memory format)."""

    node_name = "CloneBackward0"

    @staticmethod
    def forward(ctx, x, order):
        return Tensor._make(layout.in_order(x._data, order, x._backend.copy))

    @staticmethod
    def backward(ctx, g):
        return g, None


def _format_name(memory_format) -> str:
    return "preserve_format" if memory_format is None else memory_format.name


@declare(
    methods=True,
    samples=(Sample(T(3, 4)),),
    calls=(Call("clone", lambda lib, a: a.clone(), T(3), node="CloneBackward0"),),
)
def clone(x: Tensor, memory_format=None) -> Tensor:
    """A copy with its own storage (differentiable). Its layout: ``x``'s own when ``x`` is dense (the default
    ``preserve_format``, as torch's), else torch's suggestion (channels-last or row-major); or the one named."""
    name = _format_name(memory_format)
    order = layout.preserved_order(x._data) if name == "preserve_format" else layout.format_order(name, x.dim())
    if order == tuple(range(x.dim())):
        return Clone.apply(x)
    return LayoutClone.apply(x, order)


class CopyGrad(Clone):
    """The copy a leaf's first gradient is stored as under ``create_graph`` (torch's ``CopyBackwards``)."""

    node_name = "CopyBackwards"


def copy_grad(g: Tensor) -> Tensor:
    return CopyGrad.apply(g)


@declare(methods=True)
def contiguous(x: Tensor, memory_format=None) -> Tensor:
    """This tensor if it is contiguous in ``memory_format`` (row-major unless ``channels_last``/
    ``channels_last_3d``), else a copy laid out so."""
    name = "contiguous_format" if memory_format is None else memory_format.name
    if name in ("contiguous_format", "preserve_format"):
        if x.is_contiguous():
            return x
        if name == "preserve_format":
            raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
        return Clone.apply(x)
    order = layout.format_order(name, x.dim())
    return x if x.is_contiguous(memory_format=memory_format) else LayoutClone.apply(x, order)


class Cat(Function):
    node_name = "CatBackward0"

    @classmethod
    def _fast_apply(cls, args: tuple, st):
        """``apply`` for plain Tensors of one dtype on one device (``cat``'s checks passed), outside anomaly and
        inference mode, with no tracer or saved-tensor hooks (``st.fast``): the joined storage and the node
        ``_link_outputs`` builds, in one pass over the parts (for ``Stack``, parts of one shape, each given the new dim
        first); anything else (mixed dtypes, ranks or shapes) returns None."""
        stacking = cls is Stack
        if not (cls is Cat or stacking) or not st.fast:
            return None
        dim = args[0]
        first = args[1]._data
        kind, dt, rank = type(first), first.dtype, first.ndim
        if dim >= rank + stacking:  # (cat: an empty 1-d part first, which torch's legacy rule skips)
            return None
        arrays, edges, needs, sizes, meta = [], [NOT_A_TENSOR_INPUT], [False], [], [False]
        grad = False
        backend = _BACKENDS.get(kind) or backend_for(first)
        part = first.shape[:dim] + (1,) + first.shape[dim:]  # (a stacked part, its new dim inserted)
        for t in args[1:]:  # (a loop: a comprehension costs a frame per call)
            if type(t) is not Tensor or t._is_inference:
                return None
            data = t._data
            if type(data) is not kind or data.dtype is not dt or data.ndim != rank:
                return None
            if stacking:
                if data.shape != first.shape:
                    return None
                meta.append((data.shape, dt, backend))
                data = backend.reshape(data, part)
            arrays.append(data)
            sizes.append(data.shape[dim])
            edge = edge_of(t)
            edges.append(edge)
            needs.append(edge[0] is not None)
            grad = grad or edge[0] is not None
        result = _new(Tensor)
        out = result._data = backend.concatenate(arrays, dim, dt)
        if st.enabled and grad and dt.kind in "fcV":
            ctx = cls._backward_cls()
            ctx.needs_input_grad = tuple(needs)
            ctx.dim, ctx.sizes = dim, sizes
            if not stacking:
                for a in arrays:
                    meta.append((a.shape, dt, backend))
            ctx._input_meta = tuple(meta)
            ctx._output_meta = ((out.shape, dt, backend),)
            make_node(ctx, tuple(edges), result)
        return result

    @staticmethod
    def forward(ctx, dim, *tensors):
        """Joins the parts of the highest rank; empty 1-d parts beside higher-rank ones (``cat`` checked that the
        lower-rank parts are exactly those) are skipped, as torch's legacy rule skips them, yet stay inputs so that
        they get their empty gradient and still take part in type promotion."""
        rank = max(t._data.ndim for t in tensors)
        ctx.dim = dim
        ctx.sizes = [t.shape[dim] if t._data.ndim == rank else None for t in tensors]
        backend = same_backend(tensors)
        joined = [t._data for t in tensors if t._data.ndim == rank]
        return Tensor._make(backend.concatenate(joined, dim, result_np_dtype(tensors)))

    @staticmethod
    def backward(ctx, g):
        out, start = [None], 0
        for size in ctx.sizes:
            if size is None:
                out.append(g.new_zeros(0))
                continue
            out.append(narrow(g, ctx.dim, start, size))
            start += size
        return tuple(out)


class Stack(Cat):
    node_name = "StackBackward0"

    @staticmethod
    def forward(ctx, dim, *tensors):
        return Cat.forward(
            ctx, dim, *[t._view_of(t._data.reshape(t.shape[:dim] + (1,) + t.shape[dim:])) for t in tensors]
        )

    @staticmethod
    def backward(ctx, g):
        return (None, *unbind(g, ctx.dim))


@declare(
    aliases=("concat", "concatenate"),
    samples=(Sample([T(2, 3), T(4, 3)]), Sample([T(2, 3), T(2, 1)], 1)),
    calls=(
        Call("cat", lambda lib, a, b: lib.cat([a, b], 0), T(2, 3), T(1, 3), node="CatBackward0"),
        Call("cat_dim1", lambda lib, a, b: lib.cat((a, b), dim=1), T(2, 3), T(2, 1), node="CatBackward0"),
    ),
)
def cat(tensors, dim: int = 0) -> Tensor:
    """Join tensors along an existing dimension."""
    if type(dim) is int and type(tensors) in (list, tuple) and _same_rank_parts(tensors, dim):
        return Cat.apply(dim % tensors[0]._data.ndim, *tensors)  # (the common call: nothing to skip or convert)
    tensors = list(tensors)
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if t.dim() == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    # empty 1-d parts are skipped by the checks (torch's legacy rule); Cat still takes them, to give them a gradient
    # (and when every part is one, so is the result, whatever ``dim`` says)
    kept = [i for i, t in enumerate(tensors) if not (t.dim() == 1 and t.shape[0] == 0)]
    if not kept:
        return Cat.apply(0, *tensors)
    ref = tensors[kept[0]].shape
    d = wrap_dim(dim, len(ref))
    for i in kept:
        t = tensors[i]
        if t.dim() != len(ref):
            raise RuntimeError(f"Tensors must have same number of dimensions: got {len(ref)} and {t.dim()}")
        for k, (a, b) in enumerate(zip(ref, t.shape)):
            if k != d and a != b:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size {a} but got size {b} for "
                    f"tensor number {i} in the list."
                )
    return Cat.apply(d, *tensors)


concat = concatenate = cat


def _same_rank_parts(tensors, dim: int) -> bool:
    """Whether ``tensors`` are plain Tensors of one rank (at least 1, or 2 when empty 1-d parts, which torch skips,
    might be among them), one storage type and one dtype, with sizes equal but along ``dim`` (in range): the parts
    that pass ``cat``'s checks as they are."""
    if not tensors or type(tensors[0]) is not Tensor:
        return False
    first = tensors[0]._data
    shape, dt, kind = first.shape, first.dtype, type(first)
    rank = len(shape)
    if not -rank <= dim < rank or rank == 0:
        return False
    d = dim % rank
    for t in tensors:
        if type(t) is not Tensor:
            return False
        data = t._data
        other = data.shape
        if type(data) is not kind or data.dtype is not dt or len(other) != rank or (rank == 1 and not other[0]):
            return False
        if other != shape and other[:d] + other[d + 1 :] != shape[:d] + shape[d + 1 :]:
            return False
    return True


@declare(
    samples=(Sample([T(2, 3), T(2, 3)]), Sample([T(2, 3), T(2, 3)], 2)),
    calls=(
        Call("stack", lambda lib, a, b: lib.stack([a, b]), T(2, 3), T(2, 3), node="StackBackward0"),
        Call("stack_dim1", lambda lib, a, b: lib.stack([a, b], 1), T(2, 3), T(2, 3), node="StackBackward0"),
    ),
)
def stack(tensors, dim: int = 0) -> Tensor:
    """Join tensors along a new dimension."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    if type(dim) is int and _same_shape_parts(tensors):  # (the common call: the checks below pass)
        rank = tensors[0]._data.ndim + 1
        if -rank <= dim < rank:
            return Stack.apply(dim % rank, *tensors)
    for i, t in enumerate(tensors):
        if t.shape != tensors[0].shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {shape_str(tensors[0].shape)} at entry 0 and "
                f"{shape_str(t.shape)} at entry {i}"
            )
    return Stack.apply(wrap_dim(dim, tensors[0].dim() + 1), *tensors)


def _same_shape_parts(tensors: list) -> bool:
    """Whether ``tensors`` are plain Tensors of one shape (read from their storage: a Size costs more)."""
    shape = tensors[0]._data.shape if type(tensors[0]) is Tensor else None
    for t in tensors:
        if type(t) is not Tensor or t._data.shape != shape:
            return False
    return True


@declare(methods=True, samples=(Sample(T(4, 5), 1, 1, 3),))
def narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    """A view of ``length`` entries of ``dim`` from ``start`` (a negative start counts from the end)."""
    shape = x._data.shape  # (the storage's shape: ``x.shape`` builds a Size each call)
    if not shape:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    dim = wrap_dim(dim, len(shape))
    size = shape[dim]
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    if start < 0:
        start += size
    if start > size - length:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return x[(slice(None),) * dim + (slice(start, start + length),)]


def _multi_output_views(views: list) -> tuple:
    """Views that are outputs of one node: torch refuses in-place changes of them that need autograd."""
    for v in views:
        v._creation_meta = MULTI_OUTPUT_VIEW
    return tuple(views)


class Unbind(Function):
    """``unbind``: every index along ``dim`` as a view, all outputs of one node (torch's ``UnbindBackward0``)."""

    node_name = "UnbindBackward0"

    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = dim
        backend, data, lead = x._backend, x._data, (slice(None),) * dim
        return _multi_output_views([x._view_of(backend.getitem(data, lead + (i,))) for i in range(data.shape[dim])])

    @staticmethod
    def backward(ctx, *grads):
        return stack(grads, ctx.dim), None


@declare(methods=True, samples=(Sample(T(3, 4)), Sample(T(3, 4), 1)))
def unbind(x: Tensor, dim: int = 0) -> tuple:
    """The slices along ``dim`` (views of ``x``)."""
    if x.dim() == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    return Unbind.apply(x, wrap_dim(dim, x.dim()))


class SplitWithSizes(Function):
    """``split`` into pieces of the given sizes along ``dim``: views, all outputs of one node."""

    node_name = "SplitWithSizesBackward0"

    @staticmethod
    def forward(ctx, x, sizes, dim):
        ctx.dim = dim
        backend, data, lead = x._backend, x._data, (slice(None),) * dim
        out, start = [], 0
        for s in sizes:
            out.append(x._view_of(backend.getitem(data, lead + (slice(start, start + s),))))
            start += s
        return _multi_output_views(out)

    @staticmethod
    def backward(ctx, *grads):
        if nothing_records(state):  # the pieces joined directly: one dtype, as the engine hands them
            dtype = grads[0]._data.dtype
            arrays = []
            for g in grads:  # (a loop: a comprehension costs a frame per call)
                if g._data.dtype != dtype:
                    return cat(grads, ctx.dim), None, None
                arrays.append(g._data)
            return Tensor._make(grads[0]._backend.concatenate(arrays, ctx.dim, dtype)), None, None
        return cat(grads, ctx.dim), None, None


class Split(SplitWithSizes):
    """``split`` into equal pieces (the last may be smaller): torch's ``SplitBackward0``."""

    node_name = "SplitBackward0"


def _split(cls, x: Tensor, sizes: list, dim: int) -> tuple:
    """``cls.apply(x, sizes, dim)``: the views and their one node built directly (as ``_link_outputs`` links
    several outputs) on a plain float tensor when ``_direct`` allows, else through ``apply``."""
    data = x._data
    if data.dtype.kind not in "fcV" or not _direct(x):
        return cls.apply(x, sizes, dim)
    ctx = cls._backward_cls()
    outs = cls.forward(ctx, x, sizes, dim)
    st = state
    if not st.enabled:
        if not st.in_forward:
            for o in outs:
                _mark_view(o, NO_GRAD_VIEW)
        return outs
    fn = x.grad_fn
    if fn is None and not x._requires_grad:
        return outs
    backend = x._backend
    ctx.needs_input_grad = _NEEDS_3
    edge = (fn, x._output_nr) if fn is not None else (accumulator_of(x), 0)
    make_node(ctx, (edge, NOT_A_TENSOR_INPUT, NOT_A_TENSOR_INPUT), list(outs))
    ctx._input_meta = ((data.shape, data.dtype, backend), False, False)
    ctx._output_meta = [(o._data.shape, data.dtype, backend) for o in outs]
    return outs


def _equal_sizes(n: int, split_size: int) -> list:
    if split_size < 0:
        raise RuntimeError(f"split expects split_size be non-negative, but got split_size={split_size}")
    if split_size == 0:
        if n != 0:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}")
        return [0]
    return [split_size] * (n // split_size) + ([n % split_size] if n % split_size or n == 0 else [])


@declare(methods=True, samples=(Sample(T(5, 2), 2), Sample(T(3, 5), [1, 4], 1), Sample(T(4, 3), 4)))
def split(x: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Pieces of ``split_size`` along ``dim`` (the last may be smaller), or of the listed sizes."""
    if x.dim() == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    dim = wrap_dim(dim, x.dim())
    n = x.shape[dim]
    if isinstance(split_size_or_sections, (int, np.integer)):
        return _split(Split, x, _equal_sizes(n, int(split_size_or_sections)), dim)
    sizes = [int(s) for s in split_size_or_sections]
    if any(s < 0 for s in sizes):
        raise RuntimeError(
            f"split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes={sizes}"
        )
    if sum(sizes) != n:
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at dimension {dim}), "
            f"but got split_sizes={sizes}"
        )
    return _split(SplitWithSizes, x, sizes, dim)


@declare(methods=True, samples=(Sample(T(5, 2), 3), Sample(T(2, 6), 4, 1)))
def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple:
    """At most ``chunks`` equal pieces along ``dim`` (torch's ``split`` by ``ceil(size / chunks)``)."""
    if x.dim() == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    dim = wrap_dim(dim, x.dim())
    n = x.shape[dim]
    if n == 0:
        return SplitWithSizes.apply(x, [0] * chunks, dim)
    return _split(Split, x, _equal_sizes(n, -(-n // chunks)), dim)


class Repeat(Function):
    node_name = "RepeatBackward0"

    @staticmethod
    def forward(ctx, x, reps):
        ctx.in_shape, ctx.reps = x.shape, reps
        return Tensor._make(x._backend.tile(x._data, reps))

    @staticmethod
    def backward(ctx, g):
        shape = ctx.in_shape
        lead = len(ctx.reps) - len(shape)
        full = (1,) * lead + tuple(shape)
        split_shape = []
        for r, s in zip(ctx.reps, full):
            split_shape += [r, s]
        gs = g.reshape(tuple(split_shape))
        out = gs.sum(tuple(range(0, len(split_shape), 2)))
        return out.reshape(shape), None


@declare(methods=True, samples=(Sample(T(2, 3), 2, 1),))
def repeat(x: Tensor, *sizes) -> Tensor:
    """Tile the tensor ``sizes[i]`` times along each dim (new leading dims when ``sizes`` is longer)."""
    sizes = _shape_arg(sizes)
    if len(sizes) < x.dim():
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    return Repeat.apply(x, sizes)


class ToCopy(Function):
    """dtype and device conversion."""

    node_name = "ToCopyBackward0"

    @staticmethod
    def forward(ctx, x, dtype, device, order=None):
        ctx.in_dtype, ctx.in_device = x.dtype, x.device
        data = x._data
        if device is not None and device != x.device:
            data = for_device(device).from_host(x._backend.to_host(data))
        if dtype is not None and data.dtype != dtype.numpy:
            data = backend_for(data).astype(data, dtype.numpy)
        elif data is x._data and order is None:
            data = x._backend.copy(data)
        if order is not None:  # a memory format asked for: laid out in its axis order
            data = layout.in_order(data, order, backend_for(data).copy)
        return Tensor._make(data)

    @staticmethod
    def backward(ctx, g):
        if g._data.dtype.kind == "c" and not ctx.in_dtype.is_complex:  # a real input's gradient is the real part
            return ToCopy.apply(g, ctx.in_dtype, ctx.in_device), None, None, None
        return to(g, ctx.in_dtype, ctx.in_device), None, None, None


@declare(methods=("to",), name="_to")
def to(x: Tensor, *args, dtype=None, device=None, copy: bool = False, non_blocking: bool = False, **kwargs) -> Tensor:
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(other_tensor)``, and ``memory_format=`` (a
    copy laid out in that format); returns ``x`` itself when nothing changes (unless ``copy``)."""
    memory_format = kwargs.pop("memory_format", None)
    order = None
    if memory_format is not None and memory_format.name != "preserve_format":
        order = layout.format_order(memory_format.name, x.dim())
    for a in args:
        if isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif isinstance(a, str) or type(a).__name__ == "device":
            device = a
        elif a is not None:
            dtype = a
    dtype = to_dtype(dtype) if dtype is not None else None
    device = to_device(device) if device is not None else None
    same_dtype = dtype is None or dtype.numpy == x._data.dtype
    same_device = device is None or device == x.device
    if same_dtype and same_device and not copy and (order is None or x.is_contiguous(memory_format=memory_format)):
        return x
    if device is not None:
        for_device(device)
    if dtype is not None and x._data.dtype.kind == "c" and not dtype.is_complex:
        warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=2)
    if order is None and not x._data.flags.c_contiguous:  # preserve_format: a dense layout is kept
        order = layout.preserved_order(x._data)
    return ToCopy.apply(x, dtype, device, order)


# --- types ---------------------------------------------------------------------------------------------------
@declare(methods=("type",), name="_type")
def type_(input: Tensor, dtype=None, non_blocking: bool = False, **kwargs):  # noqa: A002
    """``t.type()`` names the tensor's type (``"torch.FloatTensor"``); ``t.type(dtype)`` converts, taking a dtype,
    a legacy type (``numbagrad.DoubleTensor``) or its name (``"torch.DoubleTensor"``)."""
    if dtype is None:
        return type_name(input)
    device = None
    if isinstance(dtype, str):
        if dtype not in LEGACY_NAMES:
            raise ValueError(f"invalid type: '{dtype}'")
        dtype, device = LEGACY_NAMES[dtype]
    elif isinstance(dtype, type) and issubclass(dtype, _LegacyTensor):
        dtype = dtype.dtype
    return to(input, dtype=dtype, device=device)


@declare(methods=True, samples=(Sample(T(3, 2), T(2)), Sample(T(3), T(2, dtype="int64"))))
def type_as(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """This tensor converted to ``other``'s dtype (and device, as torch's ``type(other.type())``)."""
    return to(input, dtype=other.dtype, device=other.device)


# --- flip, roll, detach --------------------------------------------------------------------------------------
class Flip(Function):
    node_name = "FlipBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims = dims if x.dim() else ()  # (a 0-d tensor takes dim 0 or -1 and has nothing to reverse)
        return Tensor._make(x._backend.flip(x._data, dims))

    @staticmethod
    def backward(ctx, g):
        return Flip.apply(g, ctx.dims), None


def _dims_arg(dims: tuple, ndim: int) -> tuple:
    if len(dims) == 1 and isinstance(dims[0], (tuple, list, Size)):
        dims = tuple(dims[0])
    out = tuple(wrap_dim(int(d), ndim) for d in dims)
    for d in out:
        if out.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return out


@declare(samples=(Sample(T(3, 4), (0,)), Sample(T(2, 3, 4), [0, 2])))
def flip(input: Tensor, dims) -> Tensor:  # noqa: A002
    """A copy with the order of elements reversed along ``dims``."""
    if isinstance(dims, (int, np.integer)):
        raise TypeError(f"flip(): argument 'dims' (position 2) must be tuple of ints, not {type(dims).__name__}")
    return Flip.apply(input, _dims_arg((dims,), input.dim()))


@declare(methods=("flip",), name="_flip_method")
def flip_method(input: Tensor, *dims) -> Tensor:  # noqa: A002
    """``t.flip(0, 1)`` or ``t.flip((0, 1))``."""
    return Flip.apply(input, _dims_arg(dims, input.dim()))


class Roll(Function):
    node_name = "RollBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x, shifts, dims):
        ctx.shifts, ctx.dims = shifts, dims
        return Tensor._make(_roll_data(x._backend, x._data, shifts, dims))

    @staticmethod
    def backward(ctx, g):
        return Roll.apply(g, tuple(-s for s in ctx.shifts), ctx.dims), None, None


def _roll_data(backend, data, shifts: tuple, dims):
    if dims is None:  # roll the flattened tensor, then restore the shape
        return backend.reshape(backend.roll(backend.reshape(backend.ascontiguous(data), (-1,)), shifts, 0), data.shape)
    return backend.roll(data, shifts, dims)


@declare(methods=True, samples=(Sample(T(3, 4), 1), Sample(T(3, 4), (1, -2), (0, 1)), Sample(T(3, 4), 2, 1)))
def roll(input: Tensor, shifts, dims=None) -> Tensor:  # noqa: A002
    """Shift elements along ``dims`` cyclically (over the flattened tensor when ``dims`` is None)."""
    shifts = (int(shifts),) if isinstance(shifts, (int, np.integer)) else tuple(int(s) for s in shifts)
    if not shifts:
        raise RuntimeError("`shifts` required")
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        return Roll.apply(input, shifts, None)
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    return Roll.apply(input, shifts, tuple(wrap_dim(int(d), input.dim()) for d in dims))


@declare(differentiable=False, samples=(Sample(T(3, 4)),))
def detach(input: Tensor) -> Tensor:  # noqa: A002
    """``input.detach()``: the same storage, no history."""
    return input.detach()


@declare(methods=("half",), name="_half")
def half(input: Tensor, memory_format=None) -> Tensor:  # noqa: A002
    """``to(float16)``."""
    return to(input, dtype=float16)


@declare(methods=("bfloat16",), name="_bfloat16")
def bfloat16_(input: Tensor, memory_format=None) -> Tensor:  # noqa: A002
    """``to(bfloat16)``."""
    return to(input, dtype=bfloat16)


@declare(methods=("short",), name="_short")
def short(input: Tensor, memory_format=None) -> Tensor:  # noqa: A002
    """``to(int16)``."""
    return to(input, dtype=int16)


@declare(methods=("char",), name="_char")
def char(input: Tensor, memory_format=None) -> Tensor:  # noqa: A002
    """``to(int8)``."""
    return to(input, dtype=int8)


@declare(methods=("byte",), name="_byte")
def byte(input: Tensor, memory_format=None) -> Tensor:  # noqa: A002
    """``to(uint8)``."""
    return to(input, dtype=uint8)


@declare(samples=(Sample(T(3), T(2), indexing="ij"), Sample(T(3), T(2), T(4), indexing="xy")))
def meshgrid(*tensors, indexing: str | None = None) -> tuple:
    """Coordinate grids from 1-D (or 0-d) tensors: output ``i`` is input ``i`` expanded along every other axis, a view
    (``"ij"``: axis ``i`` varies with input ``i``; ``"xy"``: the first two axes swapped, as numpy's default)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if indexing is None:
        warnings.warn(
            "torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.", stacklevel=2
        )
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    for t in tensors:
        if t.dim() > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t.dim()}D")
    if any(t.dtype != tensors[0].dtype for t in tensors):
        raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    order = list(tensors)
    if indexing == "xy" and len(order) >= 2:
        order[0], order[1] = order[1], order[0]
    shape = tuple(t.numel() for t in order)
    grids = []
    for axis, t in enumerate(order):
        view = [1] * len(order)
        view[axis] = -1
        grids.append(t.reshape(*view).expand(*shape))
    if indexing == "xy" and len(grids) >= 2:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)
