"""Reductions (sum, mean, max/min, amax/amin, prod, norm, var/std, argmax, any/all), softmax and log_softmax.

Forward runs on the backend (``reduce``, ``arg_reduce``). A reduction's backward that only has to broadcast the
gradient back (``sum``, ``mean``) builds the stride-0 view directly unless something records it (``create_graph``, a
forward-AD level); the others are written with tensor ops, so they are differentiable again and run on any device.
"""

from __future__ import annotations

import math
import warnings
from collections import namedtuple

import numpy as np

from .._tensor import Tensor
from .._types import get_default_dtype, to_dtype
from ..autograd.function import NOT_A_TENSOR_INPUT, Function, edge_of, make_node, saved_input_unhooked
from ..autograd.fused import fused_grads
from ..autograd.grad_mode import nothing_records, state
from ..backend import _BY_TYPE as _BACKENDS
from ..backend import backend_for
from ..scalar_math import ROWS
from . import complex_ops
from ._common import new_shell as _new
from ._common import wrap_dim, wrap_dims
from ._registry import Call, Sample, T, declare
from .inplace import write_inplace


def _return_type(name: str) -> type:
    """A ``(values, indices)`` named tuple that prints like torch's ``torch.return_types.<name>``."""

    def __repr__(self) -> str:
        return f"numbagrad.return_types.{name}(\nvalues={self.values!r},\nindices={self.indices!r})"

    base = namedtuple(name, ["values", "indices"])
    return type(name, (base,), {"__slots__": (), "__repr__": __repr__, "__module__": "numbagrad.return_types"})


return_types = {name: _return_type(name) for name in ("max", "min", "sort")}


_FIRST_ONLY = (True, False, False, False)  # needs_input_grad of a sum's node (input, axes, keepdim, dtype)
_FIRST_OF_3 = (True, False, False)  # of a mean's (input, axes, keepdim)


def _axes(t: Tensor, dim) -> tuple | None:
    """Normalised reduction axes; ``None`` means all (as an empty dim list does in torch). A 0-dim tensor accepts
    dim 0 or -1 and reduces nothing."""
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return None
    axes = wrap_dims(dim, t.dim())
    return () if t.dim() == 0 else axes


def _int_axes(dim, ndim: int) -> tuple | None:
    """``_axes`` for the common call, without its frames: an int or a non-empty tuple of distinct ints, in range
    of a tensor of some dims, wrapped and sorted; None for anything else (``_axes`` normalises and reports)."""
    if type(dim) is int:
        if -ndim <= dim < ndim:
            return (dim + ndim if dim < 0 else dim,)
        return None
    if type(dim) is not tuple or not dim:
        return None
    axes = []
    for d in dim:  # (a loop: a comprehension costs a frame per call)
        if type(d) is not int or not -ndim <= d < ndim:
            return None
        axes.append(d + ndim if d < 0 else d)
    if len(set(axes)) != len(axes):
        return None
    axes.sort()
    return tuple(axes)


def _keepdim_shape(shape, axes) -> tuple:
    if axes is None:
        return (1,) * len(shape)
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _expand_back(g: Tensor, shape, axes, keepdim: bool) -> Tensor:
    """Undo a reduction's shape change on a gradient: reshape to keepdim form, expand to ``shape``. Under
    ``create_graph`` or in a forward-AD level it stays ops; otherwise it is one stride-0 view, made directly."""
    if not nothing_records(state):
        if not keepdim:
            g = g.reshape(_keepdim_shape(shape, axes))
        return g.expand(shape)
    data = g._data
    backend = _BACKENDS.get(type(data)) or backend_for(data)  # (what g._backend returns, without its frame)
    if not keepdim and data.ndim != len(shape) and data.size != 1:  # (one element expands from any shape)
        data = backend.reshape(data, _keepdim_shape(shape, axes))
    expanded = _new(Tensor)  # (``Tensor._make`` without its call: every loss's backward starts here)
    expanded._data = backend.broadcast_to(data, shape)
    return expanded


def _count(shape, axes) -> int:
    """How many elements a reduction over ``axes`` (all when None) takes into each result."""
    if axes is None:
        return math.prod(shape)
    n = 1
    for a in axes:  # (a loop: a generator costs a frame per call)
        n *= shape[a]
    return n


class Sum(Function):
    node_name = "SumBackward0"
    _trusted = True
    _simple = True

    @classmethod
    def _fast_apply(cls, args: tuple, st):
        """``apply`` for a plain Tensor outside anomaly and inference mode, with no tracer or saved-tensor hooks
        (``st.fast``; a loss's ``.sum()``): the node built directly, without the general path's per-argument loops;
        anything else returns None."""
        x, axes, keepdim, dt = args
        if type(x) is not Tensor or not st.fast:
            return None
        data = x._data
        result = _new(Tensor)
        result._data = (_BACKENDS.get(type(data)) or backend_for(data)).reduce(data, "sum", axes, keepdim, dt)
        if st.enabled and (x._requires_grad or x.grad_fn is not None) and dt.kind in "fcV":
            ctx = cls._backward_cls()
            ctx.needs_input_grad = _FIRST_ONLY
            ctx.shape, ctx.axes, ctx.keepdim = data.shape, axes, keepdim
            if dt is not data.dtype and dt != data.dtype:  # (``is`` first: a dtype ``!=`` costs 0.1 us)
                ctx.in_dtype = x.dtype
            make_node(ctx, (edge_of(x), NOT_A_TENSOR_INPUT, NOT_A_TENSOR_INPUT, NOT_A_TENSOR_INPUT), result)
        return result

    _node_defaults = {"in_dtype": None}  # the input's dtype when ``dtype=`` changed the sum's: grads cast back

    @staticmethod
    def forward(ctx, x, axes, keepdim, dt):
        ctx.shape, ctx.axes, ctx.keepdim = x._data.shape, axes, keepdim
        if dt != x._data.dtype:
            ctx.in_dtype = x.dtype
        return Tensor._make(x._backend.reduce(x._data, "sum", axes, keepdim, dt))

    @staticmethod
    def backward(ctx, g):
        if ctx.in_dtype is not None:
            g = g.to(ctx.in_dtype)
        return _expand_back(g, ctx.shape, ctx.axes, ctx.keepdim), None, None, None


class SumDim(Sum):
    node_name = "SumBackward1"


def _sum_dtype(x: Tensor, dtype):
    """The result dtype; an integer one asked for is refused where autograd would have to follow it."""
    if dtype is not None:
        dt = to_dtype(dtype)
        if not dt.is_floating_point and state.enabled and x.requires_grad:
            raise RuntimeError(f"Autograd not support dtype: {dt.scalar_name}")
        return dt.numpy
    return np.dtype(np.int64) if x._data.dtype.kind in "biu" else x._data.dtype


@declare(
    methods=True,
    samples=(Sample(T(3, 4)), Sample(T(3, 4), 1), Sample(T(2, 3, 4), (0, 2), keepdim=True)),
    calls=(
        Call("sum", lambda lib, a: a.sum(), T(2, 3), node="SumBackward0"),
        Call("sum_dim", lambda lib, a: a.sum(1), T(2, 3), node="SumBackward1"),
        Call("sum_keepdim", lambda lib, a: a.sum(dim=0, keepdim=True), T(2, 3), node="SumBackward1"),
        Call("sum_dims", lambda lib, a: lib.sum(a, (0, 2)), T(2, 3, 2), node="SumBackward1"),
    ),
)
def sum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A001, A002
    """Sum over ``dim`` (all by default); integers and bools sum to int64, as in torch."""
    if dim is None and dtype is None and type(input) is Tensor:  # a loss's .sum(): apply's fast path, no frame
        data = input._data
        if data.dtype.kind in "fV":  # (the fast path runs only while no tracer records calls: ``state.fast``)
            result = Sum._fast_apply((input, None, keepdim, data.dtype), state)
            if result is not None:
                return result
    axes = _int_axes(dim, input._data.ndim) if dim is not None else None
    if axes is None:
        axes = _axes(input, dim)
    return (Sum if axes is None else SumDim).apply(input, axes, keepdim, _sum_dtype(input, dtype))


def _divided(data, divisor, backend):
    """``data / divisor`` (a number) on the backend, in ``data``'s dtype: what ``Tensor / divisor`` computes,
    without a tensor op's overhead."""
    return backend.divide_by(data, divisor)


def _scaled_grad(g: Tensor, divisor) -> Tensor:
    """``g / divisor`` for a backward: an op where something records it, else directly on the storage."""
    if not nothing_records(state):
        return g / divisor
    return Tensor._make(_divided(g._data, divisor, g._backend))


_SINGLE = np.dtype(np.float32)


def _mean_data(data, axes, keepdim: bool, count: int, backend):
    """The mean as torch's CPU mean computes it: the sum in the dtype, then its division by ``count``; a 2-byte
    float's sum and division in float32, rounded once at the end."""
    if data.dtype.itemsize == 2 and data.dtype.kind in "fV":
        return backend.astype(backend.divide_by(backend.reduce(data, "sum", axes, keepdim, _SINGLE), count), data.dtype)
    return backend.divide_by(backend.reduce(data, "sum", axes, keepdim, data.dtype), count)


class Mean(Function):
    node_name = "MeanBackward0"
    _trusted = True
    _simple = True

    @classmethod
    def _fast_apply(cls, args: tuple, st):
        """``apply`` for a plain Tensor outside anomaly and inference mode, with no tracer or saved-tensor hooks
        (``st.fast``; a batch statistic's ``x.mean((0, 1), keepdim=True)``): the node built directly, as
        ``Sum._fast_apply`` builds its own; anything else returns None."""
        x = args[0]
        if type(x) is not Tensor or not st.fast:
            return None
        _, axes, keepdim = args
        data = x._data
        backend = _BACKENDS.get(type(data)) or backend_for(data)
        count = _count(data.shape, axes)
        result = _new(Tensor)
        result._data = _mean_data(data, axes, keepdim, count, backend)
        if st.enabled and (x._requires_grad or x.grad_fn is not None):
            ctx = cls._backward_cls()
            ctx.needs_input_grad = _FIRST_OF_3
            ctx.shape, ctx.axes, ctx.keepdim, ctx.count = data.shape, axes, keepdim, count
            make_node(ctx, (edge_of(x), NOT_A_TENSOR_INPUT, NOT_A_TENSOR_INPUT), result)
        return result

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        data = x._data
        ctx.shape, ctx.axes, ctx.keepdim = data.shape, axes, keepdim
        ctx.count = _count(data.shape, axes)
        return Tensor._make(_mean_data(data, axes, keepdim, ctx.count, x._backend))

    @staticmethod
    def backward(ctx, g):
        return _expand_back(_scaled_grad(g, ctx.count), ctx.shape, ctx.axes, ctx.keepdim), None, None


class MeanDim(Mean):
    node_name = "MeanBackward1"


@declare(
    methods=True,
    samples=(Sample(T(3, 4)), Sample(T(3, 4), 0), Sample(T(2, 3, 4), -1, keepdim=True)),
    calls=(
        Call("mean", lambda lib, a: a.mean(), T(2, 3), node="MeanBackward0"),
        Call("mean_dim", lambda lib, a: a.mean(-1), T(2, 3), node="MeanBackward1"),
        Call("mean_keepdim", lambda lib, a: lib.mean(a, 0, keepdim=True), T(2, 3), node="MeanBackward1"),
    ),
)
def mean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A002
    """Mean over ``dim`` (all by default); integer tensors need a float ``dtype``, as in torch."""
    if dtype is None and type(input) is Tensor and input._data.dtype.kind in "fV":  # the common call, no frames
        axes = None if dim is None else _int_axes(dim, input._data.ndim)
        if axes is not None or dim is None:
            return (Mean if axes is None else MeanDim).apply(input, axes, keepdim)
    if dtype is not None:
        input = input.to(dtype)
    if not (input.is_floating_point() or input.is_complex()):
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
            f"Got: {input.dtype.scalar_name}"
        )
    axes = _axes(input, dim)
    return (Mean if axes is None else MeanDim).apply(input, axes, keepdim)


class Amax(Function):
    """amax / amin and full max() / min(): the gradient is shared evenly among tied extremes."""

    node_name = "AmaxBackward0"
    op = "max"

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        cls = ctx._forward_cls
        if x.numel() == 0 and axes is None:
            raise RuntimeError(
                f"{cls.op}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction "
                "dim with the 'dim' argument."
            )
        _check_nonempty(x, axes, "a" + cls.op if cls.node_name.startswith("A") else cls.op)
        ctx.shape, ctx.axes, ctx.keepdim = x.shape, axes, keepdim
        out = Tensor._make(x._backend.reduce(x._data, cls.op, axes, keepdim))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        full = _expand_back(out, ctx.shape, ctx.axes, ctx.keepdim)
        mask = (x == full).to(g.dtype)
        count = mask.sum(dim=ctx.axes, keepdim=True)
        return _expand_back(g, ctx.shape, ctx.axes, ctx.keepdim) * mask / count, None, None


def _check_nonempty(x: Tensor, axes, name: str) -> None:
    """torch's IndexError for a max/min over an empty dimension (there is no identity to return)."""
    for d in axes or ():
        if x.dim() and x.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


class Amin(Amax):
    node_name = "AminBackward0"
    op = "min"


class MaxAll(Amax):
    node_name = "MaxBackward1"


class MinAll(Amin):
    node_name = "MinBackward1"


@declare(
    methods=True,
    samples=(Sample(T(3, 4)), Sample(T(3, 4), 1, keepdim=True)),
    calls=(
        Call("amax", lambda lib, a: a.amax(1), T(2, 3), node="AmaxBackward0"),
        Call("amax_all", lambda lib, a: lib.amax(a), T(2, 3), node="AmaxBackward0"),
    ),
)
def amax(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:  # noqa: A002
    """The largest value over ``dim`` (all by default); ties share the gradient."""
    return Amax.apply(input, _axes(input, dim), keepdim)


@declare(
    methods=True,
    samples=(Sample(T(3, 4)), Sample(T(3, 4), 0)),
    calls=(Call("amin", lambda lib, a: a.amin(0, keepdim=True), T(2, 3), node="AminBackward0"),),
)
def amin(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:  # noqa: A002
    """The smallest value over ``dim`` (all by default); ties share the gradient."""
    return Amin.apply(input, _axes(input, dim), keepdim)


class MaxDim(Function):
    """max(dim) / min(dim): values and indices; the gradient goes to the index that was picked."""

    node_name = "MaxBackward0"
    op = "argmax"

    @staticmethod
    def forward(ctx, x, dim, keepdim):
        _check_nonempty(x, (dim,), ctx._forward_cls.op[3:])
        backend = x._backend
        data = x._data
        ctx.shape, ctx.dim, ctx.keepdim = x.shape, dim, keepdim
        if data.ndim == 0:
            indices = Tensor._make(backend.zeros((), np.int64))
            ctx.mark_non_differentiable(indices)
            ctx.save_for_backward(indices)
            return Tensor._make(backend.copy(data)), indices
        idx = backend.arg_reduce(data, ctx._forward_cls.op, dim, True)
        values = backend.take_along_axis(data, idx, dim)
        if not keepdim:
            values, idx = backend.reshape(values, _drop(values.shape, dim)), backend.reshape(idx, _drop(idx.shape, dim))
        indices = Tensor._make(idx)
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        return Tensor._make(values), indices

    @staticmethod
    def backward(ctx, g, _g_indices):
        (indices,) = ctx.saved_tensors
        if not ctx.shape:
            return g, None, None
        return IndexScatter.apply(g, indices, ctx.shape, ctx.dim, ctx.keepdim), None, None


def _drop(shape: tuple, dim: int) -> tuple:
    return shape[:dim] + shape[dim + 1 :]


class MinDim(MaxDim):
    node_name = "MinBackward0"
    op = "argmin"


class IndexScatter(Function):
    """Place ``g`` at ``indices`` along ``dim`` in zeros of ``shape`` (the backward of max(dim)/sort)."""

    node_name = "IndexScatterBackward0"

    @staticmethod
    def forward(ctx, g, indices, shape, dim, keepdim):
        ctx.dim, ctx.keepdim = dim, keepdim
        ctx.save_for_backward(indices)
        backend = g._backend
        gd, idx = g._data, indices._data
        if not keepdim:
            gd = backend.reshape(gd, _keepdim_shape(shape, (dim,)))
            idx = backend.reshape(idx, _keepdim_shape(shape, (dim,)))
        return Tensor._make(backend.put_along_axis_zeros(tuple(shape), idx, gd, dim))

    @staticmethod
    def backward(ctx, gg):
        (indices,) = ctx.saved_tensors
        backend = gg._backend
        idx = indices._data
        if not ctx.keepdim:
            idx = backend.reshape(idx, _keepdim_shape(gg.shape, (ctx.dim,)))
        picked = backend.take_along_axis(gg._data, idx, ctx.dim)
        if not ctx.keepdim:
            picked = backend.reshape(picked, _drop(picked.shape, ctx.dim))
        return Tensor._make(picked), None, None, None, None


def _max_or_min(x: Tensor, dim, keepdim: bool, full_cls, dim_cls, name: str):
    if isinstance(dim, Tensor):  # torch.max(a, b) is maximum
        return getattr(x, "maximum" if name == "max" else "minimum")(dim)
    if x._data.dtype.kind == "c":  # complex numbers have no order
        if dim is None:
            raise NotImplementedError(f"\"{name}_all\" not implemented for '{x.dtype.scalar_name}'")
        raise RuntimeError(f"{name}(): does not support complex input")
    if dim is None:
        return full_cls.apply(x, None, False)
    values, indices = dim_cls.apply(x, wrap_dim(dim, x.dim()), keepdim)
    return return_types[name](values, indices)


@declare(
    methods=True,
    samples=(Sample(T(3, 4)), Sample(T(3, 4), 1), Sample(T(3, 4), 0, keepdim=True)),
    calls=(
        Call("max", lambda lib, a: a.max(), T(2, 3), node="MaxBackward1"),
        Call("max_dim", lambda lib, a: a.max(1)[0], T(2, 3), node="MaxBackward0"),
        Call("max_keepdim", lambda lib, a: lib.max(a, 1, keepdim=True).values, T(2, 3), node="MaxBackward0"),
    ),
)
def max(input: Tensor, dim=None, keepdim: bool = False):  # noqa: A001, A002
    """``max()`` of all elements, or ``(values, indices)`` along ``dim``, or ``maximum`` of two tensors."""
    return _max_or_min(input, dim, keepdim, MaxAll, MaxDim, "max")


@declare(
    methods=True,
    samples=(Sample(T(3, 4)), Sample(T(3, 4), 1)),
    calls=(
        Call("min", lambda lib, a: a.min(), T(2, 3), node="MinBackward1"),
        Call("min_dim", lambda lib, a: a.min(0).values, T(2, 3), node="MinBackward0"),
    ),
)
def min(input: Tensor, dim=None, keepdim: bool = False):  # noqa: A001, A002
    """``min()`` of all elements, or ``(values, indices)`` along ``dim``, or ``minimum`` of two tensors."""
    return _max_or_min(input, dim, keepdim, MinAll, MinDim, "min")


def _arg_extreme(x: Tensor, op: str, dim, keepdim: bool) -> Tensor:
    """argmax / argmin, with torch's refusals: bool input, and an empty tensor or dim (no index to return)."""
    if x._data.dtype == np.bool_:
        raise RuntimeError(f"{op}(): does not support bool input")
    if dim is None and x.numel() == 0:
        raise IndexError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0.")
    if dim is not None and x.dim():
        _check_nonempty(x, (wrap_dim(dim, x.dim()),), op)
    backend = x._backend
    if x.dim() == 0:
        if dim is not None:
            wrap_dim(dim, 0)
        return Tensor._make(backend.zeros((), np.int64))
    return Tensor._make(backend.arg_reduce(x._data, op, None if dim is None else wrap_dim(dim, x.dim()), keepdim))


@declare(methods=True, differentiable=False, samples=(Sample(T(3, 4)), Sample(T(3, 4), 1)))
def argmax(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A002
    """Index of the largest value (over all elements flattened, or along ``dim``)."""
    return _arg_extreme(input, "argmax", dim, keepdim)


@declare(methods=True, differentiable=False, samples=(Sample(T(3, 4)), Sample(T(3, 4), 0)))
def argmin(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A002
    """Index of the smallest value (over all elements flattened, or along ``dim``)."""
    return _arg_extreme(input, "argmin", dim, keepdim)


class Prod(Function):
    node_name = "ProdBackward0"

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        ctx.shape, ctx.axes, ctx.keepdim = x.shape, axes, keepdim
        out = Tensor._make(x._backend.reduce(x._data, "prod", axes, keepdim, _sum_dtype(x, None)))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        g_full = _expand_back(g, ctx.shape, ctx.axes, ctx.keepdim)
        if not bool((x == 0).any()):
            return g_full * complex_ops.conj(_expand_back(out, ctx.shape, ctx.axes, ctx.keepdim) / x), None, None
        # Some zeros: the product of the *other* elements, by exclusive products (not differentiable again).
        data = x._host()
        axes = ctx.axes if ctx.axes is not None else tuple(range(data.ndim))
        moved = np.moveaxis(data, axes, tuple(range(-len(axes), 0)))
        flat = moved.reshape(moved.shape[: moved.ndim - len(axes)] + (-1,))
        ones = np.ones(flat.shape[:-1] + (1,), data.dtype)
        left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
        right = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
        others = np.moveaxis((left * right).reshape(moved.shape), tuple(range(-len(axes), 0)), axes)
        others = np.ascontiguousarray(np.conj(others) if others.dtype.kind == "c" else others)
        return g_full * Tensor._make(x._backend.from_host(others)), None, None


class ProdDim(Prod):
    node_name = "ProdBackward1"


@declare(
    methods=True,
    samples=(Sample(T(3, 4)), Sample(T(3, 4), 1)),
    calls=(
        Call("prod", lambda lib, a: a.prod(), T(2, 3), node="ProdBackward0"),
        Call("prod_dim", lambda lib, a: a.prod(1), T(2, 3), node="ProdBackward1"),
        Call("prod_keepdim", lambda lib, a: lib.prod(a, 0, keepdim=True), T(2, 3), node="ProdBackward1"),
    ),
)
def prod(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A002
    """Product over ``dim`` (all by default)."""
    if dtype is not None:
        _sum_dtype(input, dtype)  # (torch's refusal of an integer dtype under autograd)
        input = input.to(dtype)
    axes = None if dim is None else _axes(input, dim)
    return (Prod if axes is None else ProdDim).apply(input, axes, keepdim)


class Norm(Function):
    node_name = "LinalgVectorNormBackward0"

    @staticmethod
    def forward(ctx, x, p, axes, keepdim):
        ctx.p, ctx.shape, ctx.axes, ctx.keepdim = p, x.shape, axes, keepdim
        dtype = x.dtype
        if dtype.is_floating_point and dtype.itemsize == 2:  # a 2-byte float: in float32, rounded once, as torch
            out = Norm._norm(x.float(), p, axes, keepdim).to(dtype)
        else:
            out = Norm._norm(x, p, axes, keepdim)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def _norm(x, p, axes, keepdim):
        a = x.abs() if p != 2 else x  # (x * x is |x| * |x| exactly: one pass fewer for the common 2-norm)
        if p == math.inf:
            out = a.amax(axes if axes is not None else (), keepdim)
        elif p == -math.inf:
            out = a.amin(axes if axes is not None else (), keepdim)
        elif p == 0:
            out = (a != 0).to(x.dtype).sum(axes, keepdim)
        elif p == 1:
            out = a.sum(axes, keepdim)
        elif p == 2:
            out = (a * a).sum(axes, keepdim).sqrt()
        else:
            out = (a**p).sum(axes, keepdim) ** (1.0 / p)
        return out

    @staticmethod
    def backward(ctx, g):
        x, norm = ctx.saved_tensors
        p = ctx.p
        g_full = _expand_back(g, ctx.shape, ctx.axes, ctx.keepdim)
        n_full = _expand_back(norm, ctx.shape, ctx.axes, ctx.keepdim)
        if p == 0:
            return g_full * 0, None, None, None
        if p == 1:
            return g_full * x.sign(), None, None, None
        if p in (math.inf, -math.inf):
            mask = (x.abs() == n_full).to(g.dtype)
            count = mask.sum(dim=ctx.axes, keepdim=True)
            return g_full * x.sign() * mask / count, None, None, None
        if p == 2:
            scale = (g_full / n_full).where(n_full != 0, 0.0)
            return x * scale, None, None, None
        scale = (g_full / n_full ** (p - 1)).where(n_full != 0, 0.0)
        return x * x.abs() ** (p - 2) * scale, None, None, None


@declare(
    methods=True,
    samples=(Sample(T(3, 4)), Sample(T(3, 4), 1, 1), Sample(T(3, 4), 3, (0, 1))),
    calls=(
        Call("norm", lambda lib, a: a.norm(), T(2, 3), node="LinalgVectorNormBackward0"),
        Call("norm_dim", lambda lib, a: a.norm(dim=1), T(2, 3), node="LinalgVectorNormBackward0"),
        Call("norm_p1", lambda lib, a: a.norm(p=1), T(2, 3), node="LinalgVectorNormBackward0"),
        Call(
            "norm_p3_keepdim",
            lambda lib, a: lib.norm(a, p=3, dim=0, keepdim=True),
            T(2, 3),
            node="LinalgVectorNormBackward0",
        ),
    ),
)
def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:  # noqa: A002
    """Vector norm over ``dim`` (all elements by default); ``'fro'`` is the 2-norm."""
    if p == "fro" and isinstance(dim, (tuple, list)) and len(dim) > 2:  # (torch's matrix norm takes two dims)
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(str(d) for d in dim)}")
    if input._data.dtype.kind == "c":  # a complex vector's norm is that of its magnitudes
        input = complex_ops.abs_complex(input)
    if not input.is_floating_point():
        raise RuntimeError(
            f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got {input.dtype.scalar_name}"
        )
    if dtype is not None:
        input = input.to(dtype)
    if p in ("fro", None):
        p = 2
    if p == "nuc":
        raise NotImplementedError("nuclear norm is not supported by numbagrad")
    return Norm.apply(input, float(p), _axes(input, dim), keepdim)


def _spread_rounded_once(data, axes, keepdim: bool, denominator: float, backend, root: bool):
    """``backend.spread`` (its square root with ``root``: a standard deviation) in ``data``'s dtype; a 2-byte float's in
    float32, rounded once at the end, as torch computes them (rounding the variance before the root moved
    bfloat16's std of [1, 2, 4] from torch's 1.5312 to 1.5234)."""
    narrow = data.dtype.itemsize == 2 and data.dtype.kind in "fV"
    work = backend.astype(data, np.float32) if narrow else data
    out = backend.spread(work, axes, keepdim, denominator)
    if root:
        out = backend.elementwise(ROWS["sqrt"], [out], (), out.dtype)
    return backend.astype(out, data.dtype) if narrow else out


class Var(Function):
    node_name = "VarBackward0"
    _trusted = True
    _simple = True

    @classmethod
    def _fast_apply(cls, args: tuple, st):
        """``apply`` for a plain float32 or float64 Tensor outside anomaly and inference mode, with no tracer or
        saved-tensor hooks (``st.fast``): the spread and the node built directly, as ``Mean._fast_apply`` builds
        its own; anything else (a 2-byte float's spread rounded once, an inference tensor) returns None."""
        x = args[0]
        if type(x) is not Tensor or not st.fast or x._is_inference:
            return None
        data = x._data
        if data.dtype.itemsize == 2:
            return None
        _, axes, correction, keepdim = args
        denominator = _count(data.shape, axes) - correction
        result = _new(Tensor)
        result._data = (_BACKENDS.get(type(data)) or backend_for(data)).spread(data, axes, keepdim, denominator)
        if st.enabled and (x._requires_grad or x.grad_fn is not None):
            ctx = cls._backward_cls()
            ctx.needs_input_grad = _FIRST_ONLY
            ctx.shape, ctx.axes, ctx.keepdim, ctx.denominator = data.shape, axes, keepdim, denominator
            make_node(ctx, (edge_of(x), NOT_A_TENSOR_INPUT, NOT_A_TENSOR_INPUT, NOT_A_TENSOR_INPUT), result)
            ctx._saved = [saved_input_unhooked(x)]
        return result

    @staticmethod
    def forward(ctx, x, axes, correction, keepdim):
        ctx.shape, ctx.axes, ctx.keepdim = x.shape, axes, keepdim
        ctx.denominator = _count(x.shape, axes) - correction
        ctx.save_for_backward(x)
        return Tensor._make(_spread_rounded_once(x._data, axes, keepdim, ctx.denominator, x._backend, False))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _var_backward(g, x, ctx.axes, ctx.keepdim, ctx.denominator), None, None, None


def _var_backward(g: Tensor, x: Tensor, axes, keepdim: bool, denominator: float) -> Tensor:
    """``2 / (N - correction) * g * (x - mean)`` as torch computes it (``g`` of the reduced shape): with no
    degrees of freedom left, the gradient is inf (nan where x is its mean) over all dims, and the division's inf
    along given dims. Without ``create_graph`` (and with degrees of freedom left) it runs on the storage: the
    scaled ``g`` in its keepdim shape broadcast against the centered ``x``, with no expanded copy."""
    if nothing_records(state) and denominator > 0:
        backend = x._backend  # (the graph path's products in its order, so both give the same bits)
        gd = g._data
        if not keepdim and gd.ndim != x.dim():
            gd = backend.reshape(gd, _keepdim_shape(x.shape, axes))
        return Tensor._make(backend.spread_grad(gd, x._data, axes, denominator))
    g_full = _expand_back(g, x.shape, axes, keepdim)
    centered = x - x.mean(dim=axes, keepdim=True)
    if denominator <= 0 and (axes is None or x.dim() == 0):
        return g_full * (centered != 0).to(x.dtype).where(centered != 0, math.nan) * math.inf
    return g_full * centered * (2.0 / denominator if denominator else math.inf)


def _std_to_var_grad(g: Tensor, std: Tensor) -> Tensor:
    """The gradient of var from that of ``std = sqrt(var)``: ``g / (2 std)``, 0 where std is 0 (as in torch)."""
    return (g / (std * 2)).where(std != 0, 0.0)


class Std(Function):
    node_name = "StdBackward0"
    _trusted = True
    _simple = True

    @staticmethod
    def forward(ctx, x, axes, correction, keepdim):
        ctx.shape, ctx.axes, ctx.keepdim = x.shape, axes, keepdim
        ctx.denominator = _count(x.shape, axes) - correction
        out = Tensor._make(_spread_rounded_once(x._data, axes, keepdim, ctx.denominator, x._backend, True))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, std = ctx.saved_tensors
        return _var_backward(_std_to_var_grad(g, std), x, ctx.axes, ctx.keepdim, ctx.denominator), None, None, None


def _correction(unbiased, correction) -> float:
    """The ``correction`` (fractional ones too) or what ``unbiased`` means: 1 unless it is False."""
    if correction is not None:
        return correction
    return 0 if unbiased is False else 1


def _spread_axes(name: str, input: Tensor, dim, unbiased, correction) -> tuple:  # noqa: A002
    """``(axes, correction)`` of a spread, with torch's warning where no degree of freedom is left."""
    axes, correction = _axes(input, dim), _correction(unbiased, correction)
    if _count(input.shape, axes) - correction <= 0:
        warnings.warn(
            f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than the reduction factor "
            "(input numel divided by output numel).",
            UserWarning,
            stacklevel=3,
        )
    return axes, correction


def _spread_args(name: str, dim, unbiased, keepdim: bool) -> tuple:
    """``(dim, unbiased)``: ``var(True)`` is ``var(unbiased=True)``; torch has no form with ``unbiased`` and
    ``keepdim`` but no ``dim``."""
    if isinstance(dim, bool):
        return None, dim
    if dim is None and unbiased is not None and keepdim:
        raise TypeError(
            f"{name}() received an invalid combination of arguments - got (keepdim=bool, unbiased=bool, ), but "
            "expected one of: (tuple of ints dim, bool unbiased, bool keepdim)"
        )
    return dim, unbiased


@declare(
    methods=True,
    samples=(Sample(T(3, 4)), Sample(T(3, 4), 1), Sample(T(3, 4), 0, correction=0)),
    calls=(
        Call("var", lambda lib, a: a.var(), T(2, 3), node="VarBackward0"),
        Call("var_dim", lambda lib, a: a.var(1), T(2, 3), node="VarBackward0"),
        Call("var_biased_keepdim", lambda lib, a: a.var(1, keepdim=True, unbiased=False), T(2, 3), node="VarBackward0"),
    ),
)
def var(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:  # noqa: A002
    """Variance over ``dim``, Bessel-corrected by default (``correction=1``) as in torch."""
    if unbiased is None and correction is None and type(input) is Tensor:  # the common ``x.var(dim)``, no frames
        data = input._data
        axes = _int_axes(dim, data.ndim) if data.dtype.kind == "f" else None
        if axes is not None and _count(data.shape, axes) > 1:  # (a degree of freedom left: no warning)
            return Var.apply(input, axes, 1, keepdim)
    dim, unbiased = _spread_args("var", dim, unbiased, keepdim)
    _check_spread_dtype(input, "std and var")
    axes, c = _spread_axes("var", input, dim, unbiased, correction)
    if input._data.dtype.kind == "c":  # the mean squared distance |z - mean|^2: the parts' variances added
        return Var.apply(input.real, axes, c, keepdim) + Var.apply(input.imag, axes, c, keepdim)
    return Var.apply(input, axes, c, keepdim)


@declare(
    methods=True,
    samples=(Sample(T(3, 4)), Sample(T(3, 4), 1)),
    calls=(
        Call("std", lambda lib, a: a.std(), T(2, 3), node="StdBackward0"),
        Call("std_dim", lambda lib, a: lib.std(a, 0), T(2, 3), node="StdBackward0"),
        Call("std_keepdim", lambda lib, a: a.std(1, keepdim=True), T(2, 3), node="StdBackward0"),
    ),
)
def std(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:  # noqa: A002
    """Standard deviation over ``dim``, Bessel-corrected by default."""
    dim, unbiased = _spread_args("std", dim, unbiased, keepdim)
    _check_spread_dtype(input, "std and var")
    axes, c = _spread_axes("std", input, dim, unbiased, correction)
    if input._data.dtype.kind == "c":
        return (Var.apply(input.real, axes, c, keepdim) + Var.apply(input.imag, axes, c, keepdim)).sqrt()
    return Std.apply(input, axes, c, keepdim)


def softmax_grad(g: Tensor, y: Tensor, dim: int, log: bool) -> Tensor:
    """The input gradient of ``y = softmax(x, dim)`` (``log_softmax`` with ``log``) from ``g``, by the backend's
    fused kernel, and differentiable (a ``fused_grads`` node)."""

    def kernel(g, y):
        return (Tensor._make(y._backend.softmax_backward(y._data, g._data, dim, log)),)

    def formula(g, y):
        if log:
            return (g - y.exp() * g.sum(dim=dim, keepdim=True),)
        return (y * (g - (g * y).sum(dim=dim, keepdim=True)),)

    name = "LogSoftmaxBackwardDataBackward0" if log else "SoftmaxBackwardDataBackward0"
    return fused_grads(name, kernel, formula, (g, y), (True,))[0]


class Softmax(Function):
    node_name = "SoftmaxBackward0"

    @staticmethod
    def forward(ctx, x, dim):
        out = Tensor._make(x._backend.softmax(x._data, dim, False)) if x.numel() else x.clone()
        ctx.dim = dim
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return softmax_grad(g, y, ctx.dim, False), None


class LogSoftmax(Function):
    node_name = "LogSoftmaxBackward0"

    @staticmethod
    def forward(ctx, x, dim):
        out = Tensor._make(x._backend.softmax(x._data, dim, True)) if x.numel() else x.clone()
        ctx.dim = dim
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return softmax_grad(g, y, ctx.dim, True), None


def _softmax_input(x: Tensor, dim, dtype) -> tuple:
    if dtype is not None:
        x = x.to(dtype)
    elif not x.is_floating_point():
        x = x.to(get_default_dtype())
    if dim is None:
        dim = 0 if x.dim() in (0, 1, 3) else 1  # torch's legacy implicit dim
    return x, wrap_dim(dim, x.dim())


@declare(
    methods=True,
    samples=(Sample(T(3, 4), 1), Sample(T(2, 3, 4), 0)),
    calls=(
        Call("softmax", lambda lib, a: lib.softmax(a, dim=1), T(2, 3), node="SoftmaxBackward0"),
        Call("softmax_method", lambda lib, a: a.softmax(-1), T(2, 3), node="SoftmaxBackward0"),
    ),
)
def softmax(input: Tensor, dim=None, dtype=None) -> Tensor:  # noqa: A002
    """``exp(x) / sum(exp(x))`` along ``dim``, computed stably."""
    x, dim = _softmax_input(input, dim, dtype)
    return Softmax.apply(x, dim)


@declare(
    methods=True,
    samples=(Sample(T(3, 4), 1), Sample(T(2, 3, 4), -1)),
    calls=(Call("log_softmax", lambda lib, a: lib.log_softmax(a, dim=0), T(2, 3), node="LogSoftmaxBackward0"),),
)
def log_softmax(input: Tensor, dim=None, dtype=None) -> Tensor:  # noqa: A002
    """``log(softmax(x))`` along ``dim``, computed stably."""
    x, dim = _softmax_input(input, dim, dtype)
    return LogSoftmax.apply(x, dim)


def _reduce_bool(x: Tensor, op: str, dim, keepdim: bool) -> Tensor:
    """any / all; unlike the other reductions, an empty dim list reduces nothing (as in torch)."""
    axes = None if dim is None else () if isinstance(dim, (tuple, list)) and not dim else _axes(x, dim)
    return Tensor._make(x._backend.reduce(x._data, op, axes, keepdim))


@declare(methods=True, differentiable=False, samples=(Sample(T(3, 4)), Sample(T(3, 4), 1)))
def any(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001, A002
    """True where some element (over ``dim``) is nonzero."""
    return _reduce_bool(input, "any", dim, keepdim)


@declare(methods=True, differentiable=False, samples=(Sample(T(3, 4)), Sample(T(3, 4), 0)))
def all(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001, A002
    """True where every element (over ``dim``) is nonzero."""
    return _reduce_bool(input, "all", dim, keepdim)


def sum_to_shape(g: Tensor, shape) -> Tensor:
    """Reduce a broadcast gradient to ``shape``: sum leading dims, then dims where ``shape`` has 1."""
    shape = tuple(shape)
    if g._data.shape == shape:
        return g
    lead = g.dim() - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and g.shape[i + lead] != 1)
    if axes:
        g = sum(g, axes, keepdim=True)
    return g.reshape(shape) if g.shape != shape else g


@declare(methods=("sum_to_size",), name="_sum_to_size")
def sum_to_size(input: Tensor, *size) -> Tensor:  # noqa: A002
    """Sum this tensor down to ``size`` (it must be expandable to this tensor's shape)."""
    if len(size) == 1 and not isinstance(size[0], int):
        size = tuple(size[0])
    return sum_to_shape(input, size)


# --- scans, logsumexp, var_mean / std_mean, topk, argsort, unique -------------------------------------------------
return_types["topk"] = _return_type("topk")


def _scan_dtype(x: Tensor, dtype) -> np.dtype:
    return _sum_dtype(x, dtype)


class Cumsum(Function):
    node_name = "CumsumBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x, dim, dt):
        ctx.dim, ctx.in_dtype = dim, x._data.dtype
        return Tensor._make(_scan(x, "cumsum", dim, dt))

    @staticmethod
    def backward(ctx, g):
        # the gradient of a prefix sum is the suffix sum of the gradient
        if g._data.dtype != ctx.in_dtype:  # torch casts the gradient to the input's dtype first
            g = g.to(ctx.in_dtype)
        return (g if g.dim() == 0 else g.flip([ctx.dim]).cumsum(ctx.dim).flip([ctx.dim])), None, None


def _scan(x: Tensor, op: str, dim: int, dt) -> object:
    backend = x._backend
    if x._data.ndim == 0:
        return backend.astype(x._data, dt)
    return backend.cumulative(x._data, op, dim, dt)


@declare(methods=True, samples=(Sample(T(3, 4), 1), Sample(T(3, 4), 0), Sample(T(5), -1)))
def cumsum(input: Tensor, dim: int, *, dtype=None) -> Tensor:  # noqa: A002
    """Running sums along ``dim`` (integers and bools accumulate in int64, as in torch)."""
    return Cumsum.apply(input, wrap_dim(dim, input.dim()), _scan_dtype(input, dtype))


class Cumprod(Function):
    node_name = "CumprodBackward0"

    @staticmethod
    def forward(ctx, x, dim, dt):
        ctx.dim = dim
        xs = x if x._data.dtype == dt else x.to(dt)
        out = Tensor._make(_scan(xs, "cumprod", dim, dt))
        ctx.save_for_backward(xs, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        dim = ctx.dim
        if x.dim() == 0:
            return g, None, None
        if not bool((x == 0).any()):  # d out_j / d x_k = out_j / x_k for j >= k: a suffix sum, divided by x
            return (g * out).flip([dim]).cumsum(dim).flip([dim]) / x, None, None
        return _cumprod_grad_with_zeros(g, x, out, dim), None, None


def _cumprod_grad_with_zeros(g: Tensor, x: Tensor, out: Tensor, dim: int) -> Tensor:
    """The exact gradient when ``x`` has zeros (torch's too): before a line's first zero ``z`` the suffix-sum
    formula holds; after it every product holds the zero; at ``z`` itself it is ``prod(x[:z]) * sum_{j >= z} g_j *
    prod(x[z + 1 : j + 1])``. Computed on the host (not differentiable again)."""
    gh, xh, oh = (np.moveaxis(t._host(), dim, -1) for t in (g, x, out))
    n = xh.shape[-1]
    zero = xh == 0
    first = np.where(zero.any(-1), zero.argmax(-1), n)[..., None]
    pos = np.arange(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        before = np.flip(np.cumsum(np.flip(gh * oh, -1), -1), -1) / xh
    after_zero = np.cumprod(np.where(pos > first, xh, 1), -1)  # prod(x[z + 1 : j + 1]) for j >= z
    prefix = np.take_along_axis(np.concatenate([np.ones_like(oh[..., :1]), oh], -1), first, -1)  # prod(x[:z])
    at_zero = prefix * np.sum(np.where(pos >= first, gh * after_zero, 0), -1, keepdims=True)
    grad = np.where(pos < first, before, np.where(pos == first, at_zero, 0))
    return Tensor._make(x._backend.from_host(np.ascontiguousarray(np.moveaxis(grad, -1, dim)).astype(xh.dtype)))


@declare(methods=True, samples=(Sample(T(3, 4), 1), Sample(T(3, 4), 0)))
def cumprod(input: Tensor, dim: int, *, dtype=None) -> Tensor:  # noqa: A002
    """Running products along ``dim``; the gradient is exact where the input has zeros."""
    return Cumprod.apply(input, wrap_dim(dim, input.dim()), _scan_dtype(input, dtype))


class Logsumexp(Function):
    node_name = "LogsumexpBackward0"

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        ctx.shape, ctx.axes, ctx.keepdim = x.shape, axes, keepdim
        if x.numel() == 0:
            out = x.exp().sum(axes, keepdim).log()
        else:
            m = x.amax(axes if axes is not None else (), keepdim=True)
            m = m.where(m.abs() != math.inf, 0.0)  # all -inf (or an inf) stays finite to subtract, as torch
            out = (x - m).exp().sum(axes, keepdim=True).log() + m
            if not keepdim:
                out = out.reshape(tuple(s for i, s in enumerate(x.shape) if axes is not None and i not in axes))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        full = _expand_back(out, ctx.shape, ctx.axes, ctx.keepdim)
        return _expand_back(g, ctx.shape, ctx.axes, ctx.keepdim) * (x - full).exp(), None, None


@declare(methods=True, samples=(Sample(T(3, 4), 1), Sample(T(3, 4), (0, 1)), Sample(T(2, 3, 4), 0, keepdim=True)))
def logsumexp(input: Tensor, dim, keepdim: bool = False) -> Tensor:  # noqa: A002
    """``log(sum(exp(x)))`` over ``dim``, computed without overflow (integers give the default float)."""
    if not input.is_floating_point():
        input = input.to(get_default_dtype())
    axes = _axes(input, dim)
    return Logsumexp.apply(input, axes, keepdim)


class VarMean(Function):
    """``(var, mean)`` in one node (``std_mean``: ``(std, mean)``)."""

    node_name = "VarMeanBackward0"
    take_sqrt = False

    @staticmethod
    def forward(ctx, x, axes, correction, keepdim):
        ctx.shape, ctx.axes, ctx.keepdim = x.shape, axes, keepdim
        n = _count(x.shape, axes)
        ctx.n, ctx.denominator = n, n - correction
        take_sqrt = ctx._forward_cls.take_sqrt  # (a 2-byte float's spread and mean each rounded once, as var's)
        spread = Tensor._make(_spread_rounded_once(x._data, axes, keepdim, ctx.denominator, x._backend, take_sqrt))
        mean = x.mean(axes, keepdim=keepdim)
        ctx.save_for_backward(x, spread)
        return spread, mean

    @staticmethod
    def backward(ctx, g_spread, g_mean):
        x, spread = ctx.saved_tensors
        if ctx._forward_cls.take_sqrt:
            g_spread = _std_to_var_grad(g_spread, spread)
        gx = _var_backward(g_spread, x, ctx.axes, ctx.keepdim, ctx.denominator)
        gx = gx + _expand_back(g_mean / ctx.n if ctx.n else g_mean * math.nan, ctx.shape, ctx.axes, ctx.keepdim)
        return gx, None, None, None


class StdMean(VarMean):
    node_name = "StdMeanBackward0"
    take_sqrt = True


def _check_spread_dtype(input: Tensor, name: str) -> None:  # noqa: A002
    """torch's refusal of a spread (var, std and their ``_mean`` forms) over integers or bools."""
    if input._data.dtype.kind not in "fcV":
        raise RuntimeError(f"{name} only support floating point and complex dtypes")


def _spread_mean(cls, input: Tensor, dim, unbiased, keepdim: bool, correction):  # noqa: A002
    name = cls.__name__ == "StdMean" and "std_mean" or "var_mean"
    dim, unbiased = _spread_args(name, dim, unbiased, keepdim)
    _check_spread_dtype(input, name)
    axes, c = _spread_axes(name, input, dim, unbiased, correction)
    if input._data.dtype.kind == "c":  # a real spread, |z - mean|^2 (var's complex path), beside the complex mean
        spread = Var.apply(input.real, axes, c, keepdim) + Var.apply(input.imag, axes, c, keepdim)
        return (spread.sqrt() if cls.take_sqrt else spread), input.mean(axes, keepdim=keepdim)
    return cls.apply(input, axes, c, keepdim)


@declare(samples=(Sample(T(3, 4)), Sample(T(3, 4), 1), Sample(T(3, 4), 0, correction=0, keepdim=True)))
def var_mean(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> tuple:  # noqa: A002
    """``(var(input, dim), mean(input, dim))`` in one pass and one node."""
    return _spread_mean(VarMean, input, dim, unbiased, keepdim, correction)


@declare(samples=(Sample(T(3, 4)), Sample(T(3, 4), 1), Sample(T(3, 4), (0, 1), unbiased=False)))
def std_mean(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> tuple:  # noqa: A002
    """``(std(input, dim), mean(input, dim))`` in one pass and one node."""
    return _spread_mean(StdMean, input, dim, unbiased, keepdim, correction)


class Topk(Function):
    node_name = "TopkBackward0"

    @staticmethod
    def forward(ctx, x, k, dim, largest):
        backend = x._backend
        ctx.shape, ctx.dim = x.shape, dim
        if x._data.ndim == 0:
            values, idx = backend.copy(x._data), backend.zeros((), np.int64)
        else:
            values, idx = backend.topk(x._data, k, dim, largest)
        indices = Tensor._make(idx)
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        return Tensor._make(values), indices

    @staticmethod
    def backward(ctx, g, _g_indices):
        (indices,) = ctx.saved_tensors
        if not ctx.shape:
            return g, None, None, None
        return IndexScatter.apply(g, indices, ctx.shape, ctx.dim, True), None, None, None


@declare(methods=True, samples=(Sample(T(3, 5), 2), Sample(T(4, 3), 3, 0, False), Sample(T(6), 6)))
def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):  # noqa: A002
    """The ``k`` largest (or smallest) values along ``dim`` and their indices, sorted."""
    dim = wrap_dim(dim, input.dim())
    size = input.shape[dim] if input.dim() else 1
    if not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    values, indices = Topk.apply(input, int(k), dim, bool(largest))
    return return_types["topk"](values, indices)


@declare(methods=True, differentiable=False, samples=(Sample(T(3, 4)), Sample(T(3, 4), 0, True)))
def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:  # noqa: A002
    """The indices that sort ``input`` along ``dim`` (stably: equal values keep their order)."""
    if input.dim() == 0:
        return Tensor._make(input._backend.zeros((), np.int64))
    return Tensor._make(input._backend.sort(input._data, wrap_dim(dim, input.dim()), descending)[1])


@declare(
    methods=True,
    differentiable=False,
    samples=(
        Sample(T(4, 3, dtype="int64", high=4)),
        Sample(T(8, dtype="int64", high=3), return_inverse=True, return_counts=True),
        Sample(T(5, 2, dtype="int64", high=2), dim=0, return_counts=True),
    ),
)
def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False, dim=None):  # noqa: A002
    """The distinct values (sorted), with the index of each input element's value and how often each occurs;
    ``dim`` compares whole slices along that dim instead of elements."""
    if dim is not None:
        dim = wrap_dim(dim, input.dim())
    backend = input._backend
    values, inverse, counts = backend.unique(input._data, return_inverse, return_counts, dim)
    out = [Tensor._make(values)]
    if return_inverse:
        out.append(Tensor._make(inverse))
    if return_counts:
        out.append(Tensor._make(counts))
    return out[0] if len(out) == 1 else tuple(out)


@declare(methods=("cumsum_",), name="_cumsum_")
def cumsum_(input: Tensor, dim: int, *, dtype=None) -> Tensor:  # noqa: A002
    """In-place ``cumsum``: the result written into this tensor (checked first, so a refusal writes nothing)."""
    return write_inplace(input, lambda t: cumsum(t, dim, dtype=dtype))


@declare(methods=("cumprod_",), name="_cumprod_")
def cumprod_(input: Tensor, dim: int, *, dtype=None) -> Tensor:  # noqa: A002
    """In-place ``cumprod``: the result written into this tensor (checked first, so a refusal writes nothing)."""
    return write_inplace(input, lambda t: cumprod(t, dim, dtype=dtype))
