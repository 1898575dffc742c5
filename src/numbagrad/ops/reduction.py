"""Reductions (sum, mean, max/min, amax/amin, prod, norm, var/std, argmax), softmax and log_softmax.

Forward uses numpy's reductions on the storage; every backward is written with tensor ops, so it is itself
differentiable (double backward) and runs on any backend.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .._tensor import Tensor
from .._types import Size, from_numpy_dtype, to_dtype
from ..autograd.function import Function
from ._common import float_dtype, wrap_dim, wrap_dims, wrap_like


def _return_type(name: str) -> type:
    """A ``(values, indices)`` named tuple that prints like torch's ``torch.return_types.<name>``."""

    def __repr__(self) -> str:
        return f"numbagrad.return_types.{name}(\nvalues={self.values!r},\nindices={self.indices!r})"

    base = namedtuple(name, ["values", "indices"])
    return type(name, (base,), {"__slots__": (), "__repr__": __repr__, "__module__": "numbagrad.return_types"})


return_types = {name: _return_type(name) for name in ("max", "min", "sort")}


def _device_reduce(x: Tensor, op: str, axes, keepdim: bool, dt) -> Tensor:
    """sum / prod / max / min of a cuda tensor on the device (``backend.cuda.reduce``)."""
    from ..backend import cuda

    return Tensor._make(cuda.reduce(x._data, op, axes, keepdim, dt))


def _axes(t: Tensor, dim) -> tuple | None:
    if dim is None or dim == ():
        return None
    return wrap_dims(dim, t.dim())


def _keepdim_shape(shape, axes) -> tuple:
    if axes is None:
        return (1,) * len(shape)
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _expand_back(g: Tensor, shape, axes, keepdim: bool) -> Tensor:
    """Undo a reduction's shape change on a gradient: reshape to keepdim form, expand to ``shape``."""
    if not keepdim:
        g = g.reshape(_keepdim_shape(shape, axes))
    return g.expand(shape)


class Sum(Function):
    node_name = "SumBackward0"

    @staticmethod
    def forward(ctx, x, axes, keepdim, dt):
        ctx.shape, ctx.axes, ctx.keepdim = x.shape, axes, keepdim
        if x.is_cuda:
            return _device_reduce(x, "sum", axes, keepdim, dt)
        data = x._host().sum(axis=axes, keepdims=keepdim, dtype=dt)
        return wrap_like(x, np.asarray(data))

    @staticmethod
    def backward(ctx, g):
        return _expand_back(g, ctx.shape, ctx.axes, ctx.keepdim), None, None, None


class SumDim(Sum):
    node_name = "SumBackward1"


def _sum_dtype(x: Tensor, dtype):
    if dtype is not None:
        return to_dtype(dtype).numpy
    return np.int64 if x._data.dtype.kind in "biu" else x._data.dtype


def sum(x: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A001
    """Sum over ``dim`` (all by default); integers and bools sum to int64, as in torch."""
    axes = _axes(x, dim)
    return (Sum if axes is None else SumDim).apply(x, axes, keepdim, _sum_dtype(x, dtype))


class Mean(Function):
    node_name = "MeanBackward0"

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        ctx.shape, ctx.axes, ctx.keepdim = x.shape, axes, keepdim
        ctx.count = x.numel() if axes is None else int(np.prod([x.shape[a] for a in axes]))
        if x.is_cuda:
            return _device_reduce(x, "sum", axes, keepdim, x._data.dtype) / ctx.count
        return wrap_like(x, np.asarray(x._host().mean(axis=axes, keepdims=keepdim, dtype=x._data.dtype)))

    @staticmethod
    def backward(ctx, g):
        return _expand_back(g / ctx.count, ctx.shape, ctx.axes, ctx.keepdim), None, None


class MeanDim(Mean):
    node_name = "MeanBackward1"


def mean(x: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    if dtype is not None:
        x = x.to(dtype)
    if not x.is_floating_point():
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
            f"Got: {x.dtype.scalar_name}"
        )
    axes = _axes(x, dim)
    return (Mean if axes is None else MeanDim).apply(x, axes, keepdim)


class Extreme(Function):
    """amax / amin and full max() / min(): the gradient is shared evenly among tied extremes."""

    node_name = "AmaxBackward0"
    reducer = staticmethod(np.max)

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        if x.numel() == 0 and axes is None:
            raise RuntimeError(
                "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim "
                "with the 'dim' argument."
            )
        ctx.shape, ctx.axes, ctx.keepdim = x.shape, axes, keepdim
        if x.is_cuda:
            out = _device_reduce(x, ctx._forward_cls.reducer.__name__, axes, keepdim, x._data.dtype)
        else:
            out = wrap_like(x, np.asarray(ctx._forward_cls.reducer(x._host(), axis=axes, keepdims=keepdim)))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        full = _expand_back(out, ctx.shape, ctx.axes, ctx.keepdim)
        mask = (x == full).to(g.dtype)
        count = mask.sum(dim=ctx.axes if ctx.axes is not None else None, keepdim=True)
        return _expand_back(g, ctx.shape, ctx.axes, ctx.keepdim) * mask / count, None, None


class Amin(Extreme):
    node_name = "AminBackward0"
    reducer = staticmethod(np.min)


class MaxAll(Extreme):
    node_name = "MaxBackward1"


class MinAll(Amin):
    node_name = "MinBackward1"


def amax(x: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    return Extreme.apply(x, _axes(x, dim), keepdim)


def amin(x: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    return Amin.apply(x, _axes(x, dim), keepdim)


class MaxDim(Function):
    """max(dim) / min(dim): values and indices; the gradient goes to the index that was picked."""

    node_name = "MaxBackward0"
    pick = staticmethod(np.argmax)

    @staticmethod
    def forward(ctx, x, dim, keepdim):
        data = x._host()
        idx = ctx._forward_cls.pick(data, axis=dim, keepdims=True)
        values = np.take_along_axis(data, idx, axis=dim)
        if not keepdim:
            values, idx = values.squeeze(dim), idx.squeeze(dim)
        ctx.shape, ctx.dim, ctx.keepdim = x.shape, dim, keepdim
        indices = wrap_like(x, idx.astype(np.int64))
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        return wrap_like(x, values), indices

    @staticmethod
    def backward(ctx, g, _g_indices):
        (indices,) = ctx.saved_tensors
        return IndexScatter.apply(g, indices, ctx.shape, ctx.dim, ctx.keepdim), None, None


class MinDim(MaxDim):
    node_name = "MinBackward0"
    pick = staticmethod(np.argmin)


class IndexScatter(Function):
    """Place ``g`` at ``indices`` along ``dim`` in zeros of ``shape`` (the backward of max(dim)/sort)."""

    node_name = "IndexScatterBackward0"

    @staticmethod
    def forward(ctx, g, indices, shape, dim, keepdim):
        ctx.dim, ctx.keepdim = dim, keepdim
        ctx.save_for_backward(indices)
        gd, idx = g._host(), indices._host()
        if not keepdim:
            gd, idx = np.expand_dims(gd, dim), np.expand_dims(idx, dim)
        out = np.zeros(shape, gd.dtype)
        np.put_along_axis(out, idx, gd, axis=dim)
        return wrap_like(g, out)

    @staticmethod
    def backward(ctx, gg):
        (indices,) = ctx.saved_tensors
        idx = indices._host()
        if not ctx.keepdim:
            idx = np.expand_dims(idx, ctx.dim)
        picked = np.take_along_axis(gg._host(), idx, axis=ctx.dim)
        if not ctx.keepdim:
            picked = picked.squeeze(ctx.dim)
        return wrap_like(gg, picked), None, None, None, None


def _max_or_min(x: Tensor, dim, keepdim: bool, full_cls, dim_cls):
    if isinstance(dim, Tensor):  # torch.max(a, b) is maximum
        from .elementwise import maximum, minimum

        return (maximum if full_cls is MaxAll else minimum)(x, dim)
    if dim is None:
        return full_cls.apply(x, None, False)
    values, indices = dim_cls.apply(x, wrap_dim(dim, x.dim()), keepdim)
    return return_types["max" if dim_cls is MaxDim else "min"](values, indices)


def max(x: Tensor, dim=None, keepdim: bool = False):  # noqa: A001
    """``max()`` of all elements, or ``(values, indices)`` along ``dim``, or ``maximum`` of two tensors."""
    return _max_or_min(x, dim, keepdim, MaxAll, MaxDim)


def min(x: Tensor, dim=None, keepdim: bool = False):  # noqa: A001
    return _max_or_min(x, dim, keepdim, MinAll, MinDim)


def _arg_extreme(x: Tensor, pick, dim, keepdim: bool) -> Tensor:
    """argmax / argmin (no gradient): over all elements flattened, or along ``dim``."""
    if dim is None:
        return wrap_like(x, np.asarray(pick(x._host()), dtype=np.int64))
    return wrap_like(x, pick(x._host(), axis=wrap_dim(dim, x.dim()), keepdims=keepdim).astype(np.int64))


def argmax(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return _arg_extreme(x, np.argmax, dim, keepdim)


def argmin(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return _arg_extreme(x, np.argmin, dim, keepdim)


class Prod(Function):
    node_name = "ProdBackward0"

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        ctx.shape, ctx.axes, ctx.keepdim = x.shape, axes, keepdim
        out = wrap_like(x, np.asarray(x._host().prod(axis=axes, keepdims=keepdim, dtype=_sum_dtype(x, None))))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        g_full = _expand_back(g, ctx.shape, ctx.axes, ctx.keepdim)
        data = x._host()
        if not (data == 0).any():
            return g_full * _expand_back(out, ctx.shape, ctx.axes, ctx.keepdim) / x, None, None
        # Some zeros: the product of the *other* elements, by exclusive products (not differentiable again).
        axes = ctx.axes if ctx.axes is not None else tuple(range(data.ndim))
        moved = np.moveaxis(data, axes, tuple(range(-len(axes), 0)))
        flat = moved.reshape(moved.shape[: moved.ndim - len(axes)] + (-1,))
        ones = np.ones(flat.shape[:-1] + (1,), data.dtype)
        left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
        right = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
        others = np.moveaxis((left * right).reshape(moved.shape), tuple(range(-len(axes), 0)), axes)
        return g_full * wrap_like(x, np.asarray(others, order="C")), None, None


class ProdDim(Prod):
    node_name = "ProdBackward1"


def prod(x: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    if dtype is not None:
        x = x.to(dtype)
    axes = None if dim is None else (wrap_dim(dim, x.dim()),)
    return (Prod if axes is None else ProdDim).apply(x, axes, keepdim)


class Norm(Function):
    node_name = "LinalgVectorNormBackward0"

    @staticmethod
    def forward(ctx, x, p, axes, keepdim):
        a = np.abs(x._host())
        if p == np.inf:
            out = a.max(axis=axes, keepdims=keepdim)
        elif p == -np.inf:
            out = a.min(axis=axes, keepdims=keepdim)
        elif p == 0:
            out = (a != 0).sum(axis=axes, keepdims=keepdim).astype(a.dtype)
        elif p == 1:
            out = a.sum(axis=axes, keepdims=keepdim)
        elif p == 2:
            out = np.sqrt((a * a).sum(axis=axes, keepdims=keepdim))
        else:
            out = (a**p).sum(axis=axes, keepdims=keepdim) ** (1.0 / p)
        ctx.p, ctx.shape, ctx.axes, ctx.keepdim = p, x.shape, axes, keepdim
        result = wrap_like(x, np.asarray(out, dtype=x._data.dtype))
        ctx.save_for_backward(x, result)
        return result

    @staticmethod
    def backward(ctx, g):
        from .indexing import sign, where

        x, norm = ctx.saved_tensors
        p = ctx.p
        g_full = _expand_back(g, ctx.shape, ctx.axes, ctx.keepdim)
        n_full = _expand_back(norm, ctx.shape, ctx.axes, ctx.keepdim)
        if p == 0:
            return g_full * 0, None, None, None
        if p == 1:
            return g_full * sign(x), None, None, None
        if p in (np.inf, -np.inf):
            mask = (x.abs() == n_full).to(g.dtype)
            count = mask.sum(dim=ctx.axes, keepdim=True)
            return g_full * sign(x) * mask / count, None, None, None
        if p == 2:
            scale = where(n_full == 0, 0.0, g_full / n_full)
            return x * scale, None, None, None
        scale = where(n_full == 0, 0.0, g_full / n_full ** (p - 1))
        return x * x.abs() ** (p - 2) * scale, None, None, None


def norm(x: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """Vector norm over ``dim`` (all elements by default); ``'fro'`` is the 2-norm."""
    if p in ("fro", None):
        p = 2
    if p == "nuc":
        raise NotImplementedError("nuclear norm is not supported by numbagrad")
    return Norm.apply(x, float(p), _axes(x, dim), keepdim)


class Var(Function):
    node_name = "VarBackward0"

    @staticmethod
    def forward(ctx, x, axes, correction, keepdim):
        data = x._host()
        ctx.shape, ctx.axes, ctx.keepdim = x.shape, axes, keepdim
        n = data.size if axes is None else int(np.prod([data.shape[a] for a in axes]))
        ctx.denominator = n - correction
        out = wrap_like(x, np.asarray(data.var(axis=axes, ddof=correction, keepdims=keepdim), dtype=data.dtype))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, _ = ctx.saved_tensors
        centered = x - x.mean(dim=ctx.axes, keepdim=True)
        return _expand_back(g, ctx.shape, ctx.axes, ctx.keepdim) * centered * (2.0 / ctx.denominator), None, None, None


class Std(Var):
    node_name = "StdBackward0"

    @staticmethod
    def forward(ctx, x, axes, correction, keepdim):
        v = Var.forward(ctx, x, axes, correction, keepdim)
        out = wrap_like(x, np.asarray(np.sqrt(v._host())))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, std = ctx.saved_tensors
        centered = x - x.mean(dim=ctx.axes, keepdim=True)
        g_full = _expand_back(g / std, ctx.shape, ctx.axes, ctx.keepdim)
        return g_full * centered * (1.0 / ctx.denominator), None, None, None


def _correction(unbiased, correction) -> int:
    if correction is not None:
        return int(correction)
    return 0 if unbiased is False else 1


def var(x: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:
    """Variance over ``dim``, Bessel-corrected by default (``correction=1``) as in torch."""
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    return Var.apply(x, _axes(x, dim), _correction(unbiased, correction), keepdim)


def std(x: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    return Std.apply(x, _axes(x, dim), _correction(unbiased, correction), keepdim)


class Softmax(Function):
    node_name = "SoftmaxBackward0"

    @staticmethod
    def forward(ctx, x, dim):
        data = x._host()
        shifted = np.exp(data - data.max(axis=dim, keepdims=True))
        out = wrap_like(x, shifted / shifted.sum(axis=dim, keepdims=True))
        ctx.dim = dim
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(dim=ctx.dim, keepdim=True)), None


class LogSoftmax(Function):
    node_name = "LogSoftmaxBackward0"

    @staticmethod
    def forward(ctx, x, dim):
        data = x._host()
        shifted = data - data.max(axis=dim, keepdims=True)
        out = wrap_like(x, shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True)))
        ctx.dim = dim
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g - y.exp() * g.sum(dim=ctx.dim, keepdim=True), None


def _softmax_input(x: Tensor, dim, dtype) -> tuple:
    if dtype is not None:
        x = x.to(dtype)
    elif not x.is_floating_point():
        x = x.to(float_dtype(x.dtype))
    if dim is None:
        dim = 0 if x.dim() in (0, 1, 3) else 1  # torch's legacy implicit dim
    return x, wrap_dim(dim, x.dim())


def softmax(x: Tensor, dim=None, dtype=None) -> Tensor:
    x, dim = _softmax_input(x, dim, dtype)
    return Softmax.apply(x, dim)


def log_softmax(x: Tensor, dim=None, dtype=None) -> Tensor:
    x, dim = _softmax_input(x, dim, dtype)
    return LogSoftmax.apply(x, dim)


def reduce_bool(x: Tensor, how: str, dim=None, keepdim: bool = False) -> Tensor:
    """``any`` / ``all`` (no gradient)."""
    data = x._host()
    out = getattr(np, how)(data, axis=None if dim is None else wrap_dim(dim, x.dim()), keepdims=keepdim)
    return wrap_like(x, np.asarray(out))


def sum_to_shape(g: Tensor, shape) -> Tensor:
    """Reduce a broadcast gradient to ``shape``: sum leading dims, then dims where ``shape`` has 1."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.dim() - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and g.shape[i + lead] != 1)
    if axes:
        g = sum(g, axes, keepdim=True)
    return g.reshape(shape) if g.shape != shape else g


__all__ = ["Size", "from_numpy_dtype"]
