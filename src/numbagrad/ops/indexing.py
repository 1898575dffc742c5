"""Indexing (read and write), where, sort, comparisons and other non-differentiable elementwise helpers."""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from ..autograd.function import Function
from ..autograd.grad_mode import state
from ._common import as_operand, broadcast_shapes, check_same_device, result_type, shape_str, wrap_like


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
        data = x._data[index]
        if _is_advanced(index):
            return Tensor._make(np.array(data) if isinstance(data, np.ndarray) else data)
        if not hasattr(data, "shape") or isinstance(data, np.generic):  # a scalar from full integer indexing
            return x._view_of(x._data[index + (Ellipsis,)] if isinstance(x._data, np.ndarray) else data)
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
        out = np.zeros(shape, g._data.dtype)
        if _is_advanced(index):
            np.add.at(out, index, g._host())
        else:
            out[index] = g._host()
        return wrap_like(g, out)

    @staticmethod
    def backward(ctx, gg):
        return gg[ctx.index], None, None


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


def _assign(target: np.ndarray, index, value) -> None:
    """``target[index] = value``; a value that does not broadcast is torch's RuntimeError (target untouched)."""
    try:
        target[index] = value
    except ValueError:
        got = list(np.shape(value))
        want = list(np.shape(target[index]))
        lead = len(want) - len(got)
        clash = [k for k, s in enumerate(got) if lead >= 0 and s not in (1, want[k + lead])]
        if clash and not _is_advanced(index):  # torch expands the value onto a view: expand's message
            k = clash[-1]
            raise RuntimeError(
                f"The expanded size of the tensor ({want[k + lead]}) must match the existing size ({got[k]}) at "
                f"non-singleton dimension {k + lead}.  Target sizes: {want}.  Tensor sizes: {got}"
            ) from None
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {got} cannot be broadcast to indexing result of shape {want}"
        ) from None


class IndexPut(Function):
    """``x[index] = value`` as a function of (old x, value); ``setitem`` rebases x onto its node."""

    node_name = "IndexPutBackward0"

    @staticmethod
    def forward(ctx, x, value, index):
        ctx.index = index
        out = x._data.copy()
        _assign(out, index, value._data if isinstance(value, Tensor) else value)
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


def setitem(x: Tensor, index, value) -> None:
    """In-place write through an index: plain storage write, or a graph node when autograd is involved."""
    from .inplace import check_inplace, rebase

    np_index = _numpy_index(index)
    if state.enabled and x.grad_fn is None and x._requires_grad and _writes_through_a_view(np_index):
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    check_inplace(x)
    _check_bounds(x, np_index)
    value = as_operand(value)
    if isinstance(value, Tensor):
        check_same_device(x, value)
    if state.enabled and (x.requires_grad or (isinstance(value, Tensor) and value.requires_grad)):
        cls = IndexPut if _is_advanced(np_index) else CopySlices
        if isinstance(value, Tensor) and value.dtype != x.dtype:
            value = value.to(x.dtype)
        rebase(x, lambda old: cls.apply(old, value, np_index))
        return
    v = value._data if isinstance(value, Tensor) else value
    if isinstance(x._data, np.ndarray):
        if isinstance(v, np.ndarray) and np.shares_memory(v, x._data):
            v = v.copy()
        _assign(x._data, np_index, v)
    else:
        from ..backend import cuda

        cuda.setitem(x._data, np_index, v)
    x._bump_version()


class Where(Function):
    node_name = "WhereBackward0"

    @staticmethod
    def forward(ctx, cond, a, b):
        ctx.save_for_backward(cond)
        broadcast_shapes(*(t.shape for t in (cond, a, b) if isinstance(t, Tensor)))
        dt = result_type(a, b).numpy
        av = a._data if isinstance(a, Tensor) else a
        bv = b._data if isinstance(b, Tensor) else b
        if check_same_device(cond, *(t for t in (a, b) if isinstance(t, Tensor))):
            from ..backend import cuda

            return Tensor._make(cuda.where(cond._data, av, bv, dt))
        return Tensor._make(np.where(cond._data, av, bv).astype(dt, copy=False))

    @staticmethod
    def backward(ctx, g):
        (cond,) = ctx.saved_tensors
        ga = where(cond, g, 0.0) if ctx.needs_input_grad[1] else None
        gb = where(cond, 0.0, g) if ctx.needs_input_grad[2] else None
        return None, ga, gb


def where(condition: Tensor, input=None, other=None):  # noqa: A002
    """Pick ``input`` where ``condition`` holds, else ``other`` (either may be a scalar)."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    condition = as_operand(condition)
    if condition._data.dtype != np.bool_:
        condition = condition.to("bool")
    return Where.apply(condition, as_operand(input), as_operand(other))


class Sort(Function):
    node_name = "SortBackward0"

    @staticmethod
    def forward(ctx, x, dim, descending):
        data = x._host()
        idx = np.argsort(-data if descending and data.dtype.kind != "b" else data, axis=dim, kind="stable")
        if descending and data.dtype.kind == "b":
            idx = np.flip(idx, axis=dim)
        values = np.take_along_axis(data, idx, axis=dim)
        indices = wrap_like(x, idx.astype(np.int64))
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        ctx.dim, ctx.shape = dim, x.shape
        return wrap_like(x, values), indices

    @staticmethod
    def backward(ctx, g, _gi):
        from .reduction import IndexScatter

        (indices,) = ctx.saved_tensors
        return IndexScatter.apply(g, indices, ctx.shape, ctx.dim, True), None, None


def sort(x: Tensor, dim: int = -1, descending: bool = False):
    from ._common import wrap_dim
    from .reduction import return_types

    values, indices = Sort.apply(x, wrap_dim(dim, x.dim()), descending)
    return return_types["sort"](values, indices)


def _compare(x, y, fn) -> Tensor:
    x, y = as_operand(x), as_operand(y)
    is_cuda = check_same_device(*(t for t in (x, y) if isinstance(t, Tensor)))
    broadcast_shapes(*(t.shape for t in (x, y) if isinstance(t, Tensor)))
    dt = result_type(x, y).numpy
    xv = x._host().astype(dt, copy=False) if isinstance(x, Tensor) else x
    yv = y._host().astype(dt, copy=False) if isinstance(y, Tensor) else y
    out = np.asarray(fn(xv, yv))
    like = x if isinstance(x, Tensor) else y
    return wrap_like(like, out) if is_cuda else Tensor._make(out)


def eq(x, y) -> Tensor:
    if y is None or not isinstance(y, (Tensor, int, float, bool, np.ndarray, list, tuple, np.generic)):
        return False
    return _compare(x, y, np.equal)


def ne(x, y) -> Tensor:
    if y is None or not isinstance(y, (Tensor, int, float, bool, np.ndarray, list, tuple, np.generic)):
        return True
    return _compare(x, y, np.not_equal)


def lt(x, y) -> Tensor:
    return _compare(x, y, np.less)


def le(x, y) -> Tensor:
    return _compare(x, y, np.less_equal)


def gt(x, y) -> Tensor:
    return _compare(x, y, np.greater)


def ge(x, y) -> Tensor:
    return _compare(x, y, np.greater_equal)


def logical_op(x: Tensor, y, how: str) -> Tensor:
    fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[how]
    x, y = as_operand(x), as_operand(y)
    if x.is_floating_point() or (isinstance(y, Tensor) and y.is_floating_point()) or isinstance(y, float):
        raise TypeError(f"unsupported operand type(s) for bitwise {how}: floating point tensors")
    return _compare(x, y, fn)


def logical_not(x: Tensor) -> Tensor:
    return wrap_like(x, np.logical_not(x._host()))


def sign(x: Tensor) -> Tensor:
    """The sign, as a constant (its gradient is zero almost everywhere)."""
    return wrap_like(x, np.sign(x._host()))


def rounding(x: Tensor, how: str) -> Tensor:
    return wrap_like(x, getattr(np, {"round": "round", "floor": "floor", "ceil": "ceil"}[how])(x._host()))


def isnan(x: Tensor) -> Tensor:
    return wrap_like(x, np.isnan(x._host()))


def isinf(x: Tensor) -> Tensor:
    return wrap_like(x, np.isinf(x._host()))


def isfinite(x: Tensor) -> Tensor:
    return wrap_like(x, np.isfinite(x._host()))


def nonzero(x: Tensor, as_tuple: bool = False):
    idx = np.nonzero(x._host())
    if as_tuple:
        return tuple(wrap_like(x, i.astype(np.int64)) for i in idx)
    return wrap_like(x, np.stack(idx, axis=1).astype(np.int64) if idx else np.zeros((0, 0), np.int64))


def floor_divide(x, y) -> Tensor:
    return _compare(x, y, np.floor_divide)


def remainder(x, y) -> Tensor:
    return _compare(x, y, np.remainder)


def allclose(a: Tensor, b, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    b = as_operand(b)
    return bool(
        np.allclose(a._host(), b._host() if isinstance(b, Tensor) else b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    )


def isclose(a: Tensor, b, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    b = as_operand(b)
    return wrap_like(
        a, np.isclose(a._host(), b._host() if isinstance(b, Tensor) else b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    )


def equal(a: Tensor, b: Tensor) -> bool:
    """True when shapes and all values are equal."""
    return a.shape == b.shape and bool(np.array_equal(a._host(), b._host()))
