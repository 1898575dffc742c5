"""Indexing (read and write), where, sort, nonzero and the whole-tensor comparisons (allclose, equal).

The elementwise comparisons and predicates (``eq``, ``isnan``, ``logical_and``...) are rows of the table.
"""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from .._types import broadcast_shapes_or_none
from ..autograd.function import Function
from ..autograd.grad_mode import state
from ._common import as_operand, broadcast_shapes, result_np_dtype, same_backend, shape_str, wrap_dim
from ._registry import Sample, T, declare
from .inplace import check_inplace, check_written, rebase
from .reduction import IndexScatter, return_types


def _numpy_index(index):
    """Translate a torch index (ints, slices, None, Ellipsis, bool/int tensors, lists) to a numpy index."""
    if not isinstance(index, tuple):
        index = (index,)
    out = []
    for item in index:
        if isinstance(item, Tensor):
            data = item._host()
            if data.dtype.kind == "f":
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            out.append(data if data.ndim else (data.item() if data.dtype.kind != "b" else data))
        elif isinstance(item, list):
            out.append(np.asarray(item))
        else:
            out.append(item)
    return tuple(out)


def _is_advanced(np_index) -> bool:
    return any(isinstance(i, np.ndarray) for i in np_index)


def _node_kind(np_index) -> str:
    """torch names the node after the last indexing step that did something."""
    if _is_advanced(np_index):
        return "Index"
    kind = "Alias"
    for item in np_index:
        if item is None:
            kind = "Unsqueeze"
        elif isinstance(item, (int, np.integer)):
            kind = "Select"
        elif isinstance(item, slice) and item != slice(None):
            kind = "Slice"
    return kind


class _GetItem(Function):
    @staticmethod
    def forward(ctx, x, index):
        ctx.shape, ctx.index = x.shape, index
        data = x._backend.getitem(x._data, index)
        if _is_advanced(index):
            return Tensor._make(data)
        return x._view_of(data)

    @staticmethod
    def backward(ctx, g):
        return IndexAddZeros.apply(g, ctx.shape, ctx.index), None


_GETITEM = {
    kind: type(f"{kind}Item", (_GetItem,), {"node_name": f"{kind}Backward0"})
    for kind in ("Index", "Select", "Slice", "Unsqueeze", "Alias")
}


class IndexAddZeros(Function):
    """Scatter-add ``g`` into zeros of ``shape`` at ``index`` (the backward of indexing)."""

    node_name = "IndexPutBackward0"

    @staticmethod
    def forward(ctx, g, shape, index):
        ctx.index = index
        return Tensor._make(g._backend.index_add_zeros(tuple(shape), g._data.dtype, index, g._data))

    @staticmethod
    def backward(ctx, gg):
        return gg[ctx.index], None, None


@declare(methods=("__getitem__",), name="_getitem")
def getitem(x: Tensor, index) -> Tensor:
    np_index = _numpy_index(index)
    if x.dim() == 0 and np_index not in ((Ellipsis,), (None,), ()):
        if not all(i is None or i is Ellipsis for i in np_index):
            raise IndexError(
                "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in "
                "C++ to convert a 0-dim tensor to a number"
            )
    _check_bounds(x, np_index)
    kind = "Slice" if isinstance(index, slice) else _node_kind(np_index)  # torch's fast path for x[a:b] slices always
    return _GETITEM[kind].apply(x, np_index)


def _check_bounds(x: Tensor, np_index) -> None:
    dim = 0
    for item in np_index:
        if item is Ellipsis:
            dim = (
                x.dim()
                - sum(
                    1
                    for i in np_index
                    if i is not None and i is not Ellipsis and not (isinstance(i, np.ndarray) and i.dtype == np.bool_)
                )
                + dim
            )
            continue
        if item is None:
            continue
        if isinstance(item, (int, np.integer)) and dim < x.dim():
            size = x.shape[dim]
            if not -size <= item < size:
                raise IndexError(f"index {item} is out of bounds for dimension {dim} with size {size}")
        if isinstance(item, np.ndarray) and item.dtype == np.bool_:
            for k, s in enumerate(item.shape):
                if dim + k < x.dim() and s != x.shape[dim + k]:
                    raise IndexError(
                        f"The shape of the mask {shape_str(item.shape)} at index {k} does not match the shape of "
                        f"the indexed tensor {shape_str(x.shape)} at index {dim + k}"
                    )
            dim += item.ndim
            continue
        if isinstance(item, np.ndarray) and dim < x.dim() and item.size:
            size = x.shape[dim]
            if item.max() >= size or item.min() < -size:
                bad = item.max() if item.max() >= size else item.min()
                raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")
        dim += 1


def _assign(backend, target, index, value) -> None:
    """``target[index] = value``; a value that does not broadcast is torch's RuntimeError (target untouched)."""
    want = list(backend.getitem(target, index).shape)
    got = list(getattr(value, "shape", ()))
    if got and broadcast_shapes_or_none(tuple(want), tuple(got)) != tuple(want):
        _raise_shape(index, want, got)
    backend.setitem(target, index, value)


def _raise_shape(index, want: list, got: list) -> None:
    lead = len(want) - len(got)
    clash = [k for k, s in enumerate(got) if lead >= 0 and s not in (1, want[k + lead])]
    if clash and not _is_advanced(index):  # torch expands the value onto a view: expand's message
        k = clash[-1]
        raise RuntimeError(
            f"The expanded size of the tensor ({want[k + lead]}) must match the existing size ({got[k]}) at "
            f"non-singleton dimension {k + lead}.  Target sizes: {want}.  Tensor sizes: {got}"
        )
    raise RuntimeError(
        f"shape mismatch: value tensor of shape {got} cannot be broadcast to indexing result of shape {want}"
    )


class IndexPut(Function):
    """``x[index] = value`` as a function of (old x, value); ``setitem`` rebases x onto its node."""

    node_name = "IndexPutBackward0"

    @staticmethod
    def forward(ctx, x, value, index):
        ctx.index = index
        out = x._backend.copy(x._data)
        _assign(x._backend, out, index, value._data if isinstance(value, Tensor) else value)
        return Tensor._make(out)

    @staticmethod
    def backward(ctx, g):
        gx = g.clone()
        gx[ctx.index] = 0
        gv = g[ctx.index] if ctx.needs_input_grad[1] else None
        return gx, gv, None


class CopySlices(IndexPut):
    node_name = "CopySlices"


def _writes_through_a_view(np_index) -> bool:
    """torch writes ``x[0] = v`` through a view of ``x`` (ints, None, partial slices) and ``x[mask] = v`` into x."""
    return any(
        i is None or isinstance(i, (int, np.integer)) or (isinstance(i, slice) and i != slice(None)) for i in np_index
    )


@declare(methods=("__setitem__",), name="_setitem")
def setitem(x: Tensor, index, value) -> None:
    """In-place write through an index: plain storage write, or a graph node when autograd is involved."""
    np_index = _numpy_index(index)
    if state.enabled and x.grad_fn is None and x._requires_grad and _writes_through_a_view(np_index):
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    check_inplace(x)
    _check_bounds(x, np_index)
    value = as_operand(value, "__setitem__", 2, "value")
    if isinstance(value, Tensor):
        same_backend((x, value))
        if not _is_advanced(np_index) and value._backend is x._backend:
            check_written(x, (value,), x._backend.getitem(x._data, np_index))
    if state.enabled and (x.requires_grad or (isinstance(value, Tensor) and value.requires_grad)):
        cls = IndexPut if _is_advanced(np_index) else CopySlices
        if isinstance(value, Tensor) and value.dtype != x.dtype:
            value = value.to(x.dtype)
        rebase(x, lambda old: cls.apply(old, value, np_index))
        return
    v = value._data if isinstance(value, Tensor) else value
    if isinstance(value, Tensor) and value._backend is not x._backend:  # a 0-dim cpu value into a cuda tensor
        v = value.item()
    _assign(x._backend, x._data, np_index, v)
    x._bump_version()


class Where(Function):
    node_name = "WhereBackward0"

    @staticmethod
    def forward(ctx, cond, a, b):
        ctx.save_for_backward(cond)
        shape = broadcast_shapes(*(t.shape for t in (cond, a, b) if isinstance(t, Tensor)))
        ctx.shapes = [t.shape if isinstance(t, Tensor) else None for t in (a, b)]
        backend = same_backend((cond, a, b))
        av = a._data if isinstance(a, Tensor) else a
        bv = b._data if isinstance(b, Tensor) else b
        out = backend.where(cond._data, av, bv, result_np_dtype((a, b)))
        return Tensor._make(out if out.shape == shape else backend.copy(backend.broadcast_to(out, shape)))

    @staticmethod
    def backward(ctx, g):
        (cond,) = ctx.saved_tensors
        ga = where(cond, g, 0.0).sum_to_size(ctx.shapes[0]) if ctx.needs_input_grad[1] else None
        gb = where(cond, 0.0, g).sum_to_size(ctx.shapes[1]) if ctx.needs_input_grad[2] else None
        return None, ga, gb


@declare(samples=(Sample(T(3, 4, dtype="bool"), T(3, 4), T(3, 4)), Sample(T(3, 1, dtype="bool"), T(3, 4), 0.5)))
def where(condition: Tensor, input=None, other=None):  # noqa: A002
    """Pick ``input`` where ``condition`` holds, else ``other`` (either may be a scalar)."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    condition = as_operand(condition, "where", 1, "condition")
    if condition._data.dtype != np.bool_:
        condition = condition.to("bool")
    return Where.apply(condition, as_operand(input, "where", 2, "input"), as_operand(other, "where", 3, "other"))


@declare(methods=("where",), name="_where_method")
def where_method(self: Tensor, condition, other) -> Tensor:
    """``self.where(condition, other)`` is ``where(condition, self, other)``."""
    return where(condition, self, other)


class Sort(Function):
    node_name = "SortBackward0"

    @staticmethod
    def forward(ctx, x, dim, descending):
        backend = x._backend
        if x.dim() == 0:
            values, idx = backend.copy(x._data), backend.zeros((), np.int64)
        else:
            values, idx = backend.sort(x._data, dim, descending)
        indices = Tensor._make(idx)
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        ctx.dim, ctx.shape = dim, x.shape
        return Tensor._make(values), indices

    @staticmethod
    def backward(ctx, g, _gi):
        (indices,) = ctx.saved_tensors
        if not ctx.shape:
            return g, None, None
        return IndexScatter.apply(g, indices, ctx.shape, ctx.dim, True), None, None


@declare(methods=True, samples=(Sample(T(3, 4)), Sample(T(3, 4), 0, True)))
def sort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):
    """``(values, indices)`` sorted along ``dim`` (stable: equal values keep their order)."""
    values, indices = Sort.apply(x, wrap_dim(dim, x.dim()), descending)
    return return_types["sort"](values, indices)


@declare(methods=True, differentiable=False)
def nonzero(x: Tensor, *, as_tuple: bool = False):
    """The indices of the nonzero elements: an (n, dim) int64 tensor, or one index tensor per dim."""
    backend = x._backend
    idx = np.nonzero(np.atleast_1d(x._host())) if x.dim() else np.nonzero(np.atleast_1d(x._host()))
    if as_tuple:
        return tuple(Tensor._make(backend.from_host(i.astype(np.int64))) for i in idx[: max(x.dim(), 1)])
    stacked = np.stack(idx, axis=1).astype(np.int64) if x.dim() else np.zeros((len(idx[0]), 0), np.int64)
    return Tensor._make(backend.from_host(np.ascontiguousarray(stacked)))


@declare(methods=True, differentiable=False)
def allclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:  # noqa: A002
    """``|input - other| <= atol + rtol * |other|`` everywhere."""
    b = as_operand(other, "allclose")
    return bool(
        np.allclose(input._host(), b._host() if isinstance(b, Tensor) else b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    )


@declare(methods=True, differentiable=False)
def isclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:  # noqa: A002
    """Elementwise ``|input - other| <= atol + rtol * |other|``."""
    b = as_operand(other, "isclose")
    host = np.isclose(
        input._host(), b._host() if isinstance(b, Tensor) else b, rtol=rtol, atol=atol, equal_nan=equal_nan
    )
    return Tensor._make(input._backend.from_host(np.asarray(host)))


@declare(methods=True, differentiable=False)
def equal(input: Tensor, other: Tensor) -> bool:  # noqa: A002
    """True when shapes and all values are equal."""
    return input.shape == other.shape and bool(np.array_equal(input._host(), other._host()))


@declare(methods=("fill_",), name="_fill_")
def fill_(input: Tensor, value) -> Tensor:  # noqa: A002 - torch's name
    """Fill with one value (a number or a 0-dim tensor)."""
    if isinstance(value, Tensor) and value.dim() != 0:
        raise RuntimeError(
            f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} dimensions."
        )
    setitem(input, Ellipsis, value)
    return input


@declare(methods=("zero_",), name="_zero_")
def zero_(input: Tensor) -> Tensor:  # noqa: A002
    """Fill with zeros."""
    return fill_(input, 0)


@declare(methods=("copy_",), name="_copy_")
def copy_(input: Tensor, src, non_blocking: bool = False) -> Tensor:  # noqa: A002
    """Copy ``src`` (broadcast, cast, moved to this tensor's device) into this tensor."""
    src = as_operand(src, "copy_", 1, "src")
    if isinstance(src, Tensor):
        broadcast_shapes(input.shape, src.shape)  # torch's message for sources that cannot broadcast
        if src.device != input.device:
            src = src.to(input.device)
    setitem(input, Ellipsis, src)
    return input
