"""Indexing (read and write), where, sort, nonzero and the whole-tensor comparisons (allclose, equal).

The elementwise comparisons and predicates (``eq``, ``isnan``, ``logical_and``...) are rows of the table.
"""

from __future__ import annotations

import functools

import numpy as np

from .._samples import assigned
from .._tensor import Tensor
from .._typeinfo import CPP_NAMES as _CPP
from .._types import broadcast_shapes_or_none
from ..autograd.function import NOT_A_TENSOR_INPUT, Function, edge_of, edges_of, make_node, saved_input_unhooked
from ..autograd.grad_mode import nothing_records, state
from ..backend import _BY_TYPE as _BACKENDS
from ..backend import backend_for
from ._common import (
    as_operand,
    broadcast_shapes,
    checked_scalar,
    invalid_arguments,
    not_a_tensor,
    result_np_dtype,
    same_backend,
    shape_str,
    wrap_dim,
)
from ._common import new_shell as _new
from ._registry import Call, Sample, T, declare
from .inplace import (
    check_inplace,
    check_view_change,
    check_written,
    has_internal_overlap,
    needs_graph,
    rebase,
    write_inplace,
)
from .reduction import IndexScatter, return_types
from .shape import _direct, _view_result, cat


def _numpy_index(index, ndim: int | None = None, backend=None):
    """Translate a torch index (ints, slices, None, Ellipsis, bools, bool/int tensors, lists) to a numpy index.

    A list holding tensors, lists, slices, None or Ellipsis is a tuple of indices (torch's legacy rule); a bool
    (or a 0-d bool tensor) stays a Python bool, for ``_stages`` to turn into a new dim. With ``ndim`` given, an
    index with several ``...`` has each of them span what torch's does. An integer tensor on ``backend``'s
    device stays its storage there (a device array, not copied to the host); other tensors come to the host."""
    if isinstance(index, list) and len(index) < 32 and any(_indexes_a_dim(i) for i in index):
        index = tuple(index)
    elif not isinstance(index, tuple):
        index = (index,)
    out = []
    for item in index:
        if isinstance(item, Tensor):
            if item._backend is backend and item.dim() and item._data.dtype.kind in "iu":
                out.append(item._data)
                continue
            data = item._host()
            if data.dtype.kind in "fV":
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            out.append(data if data.ndim else bool(data) if data.dtype.kind == "b" else int(data))
        elif isinstance(item, list):
            data = np.asarray(item) if item else np.zeros(0, np.int64)
            if data.dtype.kind not in "biu":
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            out.append(data)
        elif isinstance(item, (bool, np.bool_)):
            out.append(bool(item))
        elif isinstance(item, slice):
            if item.step is not None and item.step < 0:
                raise ValueError("step must be greater than zero")
            out.append(item)
        else:
            out.append(item)
    ellipses = sum(i is Ellipsis for i in out)
    if ndim is not None and (ellipses > 1 or (ellipses and _is_advanced(out))):
        out = _expand_ellipses(out, ndim)  # (numpy parts tensor indices around even an empty ``...``; torch not)
    elif ndim is not None and len(out) > ndim and sum(_spans(i) for i in out) > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    return tuple(out)


def _is_array(item) -> bool:
    """Whether an index item is an array (numpy's or a device's), not an int, slice, None, ``...`` or bool."""
    return hasattr(item, "ndim") and hasattr(item, "dtype") and not isinstance(item, np.generic)


def _indexes_a_dim(item) -> bool:
    return isinstance(item, (Tensor, list, tuple, slice)) or item is None or item is Ellipsis


def _spans(item) -> int:
    """How many of the indexed tensor's dims an index item consumes."""
    if item is None or item is Ellipsis or type(item) is bool:
        return 0
    if _is_array(item) and item.dtype == np.bool_:
        return item.ndim
    return 1


def _expand_ellipses(items: list, ndim: int) -> list:
    """torch lets each ``...`` span the dims the other items leave, so all but the first span nothing that
    exists: full slices, those past the last dim dropped."""
    fill = max(ndim - sum(_spans(i) for i in items), 0)
    out = []
    for item in items:
        out.extend([slice(None)] * fill if item is Ellipsis else [item])
    while len(out) > ndim and isinstance(out[-1], slice) and out[-1] == slice(None):
        out.pop()
    if sum(_spans(i) for i in out) > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    return out


def _stages(np_index):
    """torch applies ints (as ``select``), slices, None and bools (as a new dim) first and the tensor indices
    to that view, so an int is not an advanced index and does not move the advanced result's dims; numpy counts
    it as one. Returns None where numpy's one step gives torch's answer, else ``(basic, advanced)``, the two
    indices to apply one after the other."""
    ints = bools = advanced = False
    for item in np_index:
        if type(item) is bool:
            bools = True
        elif isinstance(item, (int, np.integer)):
            ints = True
        elif _is_array(item):
            advanced = True
    if not bools and not (ints and advanced):
        return None
    basic, rest = [], []
    for item in np_index:
        if type(item) is bool:  # a new dim of size 1, indexed by [0] (True) or by nothing (False)
            basic.append(None)
            rest.append(np.zeros(int(item), np.int64))
        elif _is_array(item):
            basic.extend([slice(None)] * _spans(item))
            rest.append(item)
        elif isinstance(item, (int, np.integer)):
            basic.append(item)
        else:
            basic.append(item)
            rest.append(item if item is Ellipsis else slice(None))
    return tuple(basic), tuple(rest)


def _is_advanced(np_index) -> bool:
    return any(_is_array(i) or type(i) is bool for i in np_index)


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


_ARRAY = object()  # where an advanced index had an array, once the array is saved for backward


def _save_index(ctx, index) -> None:
    """Keep ``index`` for backward; its arrays are saved as torch saves an advanced index's tensors, so they are
    freed after backward and a second backward raises torch's error."""
    if _is_advanced(index):
        ctx.save_for_backward(*[Tensor._make(i) for i in index if _is_array(i)])
        index = tuple(_ARRAY if _is_array(i) else i for i in index)
    ctx.index = index


def _saved_index(ctx) -> tuple:
    """The index ``_save_index`` kept (its arrays read back from the saved tensors)."""
    index = ctx.index
    if any(i is _ARRAY for i in index):
        arrays = iter(ctx.saved_tensors)
        index = tuple(next(arrays)._data if i is _ARRAY else i for i in index)
    return index


class _GetItem(Function):
    @staticmethod
    def forward(ctx, x, index):
        ctx.shape = x.shape
        _save_index(ctx, index)
        data = x._backend.getitem(x._data, index)
        if _is_advanced(index):
            return Tensor._make(data)
        return x._view_of(data)

    @staticmethod
    def backward(ctx, g):
        index = _saved_index(ctx)
        if nothing_records(state):  # the scatter directly, without IndexAddZeros' node
            data = g._data
            return Tensor._make(g._backend.index_add_zeros(tuple(ctx.shape), data.dtype, index, data)), None
        return IndexAddZeros.apply(g, ctx.shape, index), None


#: An advanced index's result is a new tensor (no view to mark) and its backward's gradient has the input's shape
#: and dtype, so that node takes ``apply``'s simple path (``_simple``, ``_trusted``); the views take the general one.
_GETITEM = {
    kind: type(
        f"{kind}Item",
        (_GetItem,),
        {"node_name": f"{kind}Backward0", "_simple": kind == "Index", "_trusted": kind == "Index"},
    )
    for kind in ("Index", "Select", "Slice", "Unsqueeze", "Alias")
}


class _Rows(_GETITEM["Index"]):
    """``x[rows]`` for one integer array picking rows (``_rows``, an embedding lookup ``C[X]``): the same node as
    the general index's, its index saved as ``_save_index`` saves it, without the general forward's scans of the
    index items."""

    node_name = "IndexBackward0"

    @staticmethod
    def forward(ctx, x, rows):
        ctx.shape = x._data.shape
        ctx.save_for_backward(Tensor._make(rows))
        ctx.index = _ONE_ARRAY
        return Tensor._make(x._backend.getitem(x._data, (rows,)))


_ONE_ARRAY = (_ARRAY,)


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


_NEEDS_2 = (True, False)


def _basic_view(x: Tensor, index):
    """``x[index]`` for the common basic index, built directly: ints in range and slices of plain ints with a
    positive step (``x[:, 1:3]``, ``select``, ``narrow``), no more than the tensor's dims; None for anything else
    (the general path normalises, reports errors and names the node the same way)."""
    data = x._data
    shape = data.shape
    kind = "Alias"
    if type(index) is not tuple:
        if type(index) is slice:
            kind = "Slice"  # (torch's own fast path for ``x[a:b]`` names its node so even for ``x[:]``)
        index = (index,)
    if len(index) > len(shape) or not shape or not _direct(x):
        return None
    for d, item in enumerate(index):  # (a loop: a comprehension costs a frame per call)
        t = type(item)
        if t is int:
            if not -shape[d] <= item < shape[d]:
                return None
            kind = "Select"
        elif t is slice:
            start, stop, step = item.start, item.stop, item.step
            if not (
                (start is None or type(start) is int)
                and (stop is None or type(stop) is int)
                and (step is None or (type(step) is int and step > 0))
            ):
                return None
            if start is not None or stop is not None or step is not None:
                kind = "Slice"
        else:
            return None
    cls = _GETITEM[kind]
    out, ctx = _view_result(cls, x, x._backend.getitem(data, index), _NEEDS_2)
    if ctx is not None:
        ctx.shape, ctx.index = shape, index
        backend = x._backend  # (what ``_link_outputs`` records for a node whose gradients the engine checks)
        ctx._input_meta = ((shape, data.dtype, backend), False)
        ctx._output_meta = ((out._data.shape, data.dtype, backend),)
    return out


@declare(
    methods=("__getitem__",),
    name="_getitem",
    calls=(
        Call("index_int", lambda lib, a: a[1], T(2, 3), node="SelectBackward0"),
        Call("index_int_int", lambda lib, a: a[1, 2], T(2, 3), node="SelectBackward0"),
        Call("index_negative", lambda lib, a: a[-1], T(2, 3), node="SelectBackward0"),
        Call("index_slice", lambda lib, a: a[:, 1:], T(2, 3), node="SliceBackward0"),
        Call("index_full_slice", lambda lib, a: a[:], T(2, 3), node="SliceBackward0"),
        Call("index_step", lambda lib, a: a[::2], T(5), node="SliceBackward0"),
        Call("index_int_slice", lambda lib, a: a[1, 1:], T(2, 3), node="SliceBackward0"),
        Call("index_slice_int", lambda lib, a: a[1:, 1], T(2, 3), node="SelectBackward0"),
        Call("index_none", lambda lib, a: a[None], T(2, 3), node="UnsqueezeBackward0"),
        Call("index_slice_none", lambda lib, a: a[:, None], T(2, 3), node="UnsqueezeBackward0"),
        Call("index_ellipsis_int", lambda lib, a: a[..., 1], T(2, 3), node="SelectBackward0"),
        Call("index_ellipsis", lambda lib, a: a[...], T(2, 3), node="AliasBackward0"),
        Call("index_bool_mask", lambda lib, a: a[a > 0], T(2, 3), node="IndexBackward0"),
        Call("index_int_tensor", lambda lib, a: a[lib.tensor([0, 2, 0])], T(3, 2), node="IndexBackward0"),
        Call("index_int_list", lambda lib, a: a[[0, 2]], T(3, 2), node="IndexBackward0"),
        Call("index_slice_int_tensor", lambda lib, a: a[:, lib.tensor([1, 0])], T(3, 2), node="IndexBackward0"),
    ),
)
def getitem(x: Tensor, index) -> Tensor:
    out = _basic_view(x, index)
    if out is not None:
        return out
    if type(index) is Tensor:
        out = _rows(x, index)
        if out is not None:
            return out
    np_index = _index_of_0_dim(x, index) if x.dim() == 0 else _numpy_index(index, x.dim(), x._backend)
    _check_bounds(x, np_index)
    if any(_is_array(i) and i.dtype != np.bool_ for i in np_index) and _selects_nothing(x, np_index):
        np_index = tuple(_zeros_of(i) if _is_array(i) and i.dtype != np.bool_ else i for i in np_index)
    stages = _stages(np_index)
    if stages is not None:  # the basic part first, as a view, then the advanced part (torch's two steps)
        return getitem(getitem(x, stages[0]), stages[1])
    kind = "Slice" if isinstance(index, slice) else _node_kind(np_index)  # torch's fast path for x[a:b] slices always
    return _GETITEM[kind].apply(x, np_index)


def _rows(x: Tensor, index: Tensor):
    """``x[index]`` for one integer tensor (of at least one dim, on ``x``'s device) picking rows of a tensor with
    no empty dim (an embedding lookup ``C[X]``): the bounds checked and the node applied without the general
    path's normalisation; None for anything else."""
    data = index._data
    shape = x.shape
    if data.dtype.kind not in "iu" or not data.ndim or not shape or 0 in shape or index._backend is not x._backend:
        return None
    size = shape[0]
    x._backend.check_index(data, -size, size, None, functools.partial(_out_of_bounds, dim=0, size=size))
    return _Rows.apply(x, data)


def _index_of_0_dim(x: Tensor, index) -> tuple:
    """``_numpy_index`` for a 0-dim tensor, after torch's refusals: its own texts for a bare int or slice, and
    too many indices for any other item that spans a dim."""
    if isinstance(index, int) and not isinstance(index, bool):
        raise IndexError(
            "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in "
            "C++ to convert a 0-dim tensor to a number"
        )
    if isinstance(index, slice):
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    np_index = _numpy_index(index, 0)
    if any(_spans(i) for i in np_index):
        raise IndexError("too many indices for tensor of dimension 0")
    return np_index


def _check_bounds(x: Tensor, np_index) -> None:
    dim = 0
    for item in np_index:
        if item is Ellipsis:
            dim += x.dim() - sum(_spans(i) for i in np_index)
            continue
        if item is None or type(item) is bool:
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
        if _is_array(item) and dim < x.dim() and item.size and not _selects_nothing(x, np_index):
            size = x.shape[dim]
            backend_for(item).check_index(
                item, -size, size, None, functools.partial(_out_of_bounds, dim=dim, size=size)
            )
        dim += 1


def _selects_nothing(x: Tensor, np_index) -> bool:
    """Whether the index's basic part leaves no elements (an empty slice, or an empty dim no item consumes):
    torch's index kernel then reads nothing, so it checks no index array's bounds (``x[0, 0:0, [5]]`` is empty)."""
    dim, consumed = 0, set()
    for item in np_index:
        if item is Ellipsis:
            dim += x.dim() - sum(_spans(i) for i in np_index)
            continue
        span = _spans(item)
        if isinstance(item, slice) and dim < x.dim() and not len(range(*item.indices(x.shape[dim]))):
            return True
        consumed.update(range(dim, dim + span))
        dim += span
    return any(x.shape[d] == 0 for d in range(x.dim()) if d not in consumed)


def _zeros_of(item):
    """An index array of ``item``'s shape holding 0: where nothing is selected, any in-range index gives the same
    empty result (numpy would check the bounds torch leaves unchecked)."""
    return backend_for(item).full(item.shape, 0, item.dtype)


def _out_of_bounds(bad: int, *, dim: int, size: int, error=IndexError, message=None) -> Exception:
    """torch's error for index ``bad`` out of range of a dim (``functools.partial`` leaves ``bad`` to the check);
    an index into an empty dim has torch's own text, which names neither."""
    if message is None and size == 0 and error is IndexError:
        message = "index is out of bounds for dimension with size 0"
    return error(message or f"index {bad} is out of bounds for dimension {dim} with size {size}")


def _assign(backend, target, index, value) -> None:
    """``target[index] = value``; a value that does not broadcast is torch's RuntimeError (target untouched).
    As in torch, the value's leading 1-sized dims are dropped first, and ints index before tensors do."""
    stages = _stages(index)
    if stages is not None:
        target, index = backend.getitem(target, stages[0]), stages[1]
    want = list(backend.getitem(target, index).shape)
    got = list(getattr(value, "shape", ()))
    while got and got[0] == 1:
        got.pop(0)
    if got and broadcast_shapes_or_none(tuple(want), tuple(got)) != tuple(want):
        _raise_shape(index, want, got)
    if hasattr(value, "shape") and len(got) != value.ndim:
        value = backend.reshape(value, tuple(got))
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
        _save_index(ctx, index)
        ctx.value_shape = value.shape if isinstance(value, Tensor) else None
        out = x._backend.copy(x._data)
        _assign(x._backend, out, index, value._data if isinstance(value, Tensor) else value)
        return Tensor._make(out)

    @staticmethod
    def backward(ctx, g):
        index = _saved_index(ctx)
        gx = g.clone()
        gx[index] = 0
        gv = g[index] if ctx.needs_input_grad[1] else None
        if gv is not None and gv.dim() < len(ctx.value_shape):  # the value's leading 1-dims, dropped in forward
            gv = gv.reshape((1,) * (len(ctx.value_shape) - gv.dim()) + tuple(gv.shape))
        return gx, gv, None


class CopySlices(IndexPut):
    node_name = "CopySlices"


class CopyBackwards(IndexPut):
    """``copy_`` into a tensor that is no view: the whole of it replaced (torch's node name)."""

    node_name = "CopyBackwards"


def _writes_through_a_view(np_index) -> bool:
    """torch writes ``x[0] = v`` through a view of ``x`` (ints, None, partial slices) and ``x[mask] = v`` into x."""
    return any(
        i is None or isinstance(i, (int, np.integer)) or (isinstance(i, slice) and i != slice(None)) for i in np_index
    )


@declare(
    methods=("__setitem__",),
    name="_setitem",
    calls=(
        Call("setitem_row", lambda lib, a, b: assigned(a.clone(), 0, b), T(2, 3), T(3), node="CopySlices"),
        Call("setitem_slice", lambda lib, a, b: assigned(a * 1, slice(1, None), b), T(3), T(2), node="CopySlices"),
        Call("setitem_scalar", lambda lib, a: assigned(a.clone(), (slice(None), 1), 5.0), T(2, 3), node="CopySlices"),
        Call("setitem_mask", lambda lib, a: assigned(a.clone(), a > 0, 0.0), T(2, 3), node="IndexPutBackward0"),
        Call(
            "setitem_index_tensor",
            lambda lib, a, b: assigned(a.clone(), lib.tensor([0, 1]), b),
            T(3, 2),
            T(2),
            node="IndexPutBackward0",
        ),
    ),
)
def setitem(x: Tensor, index, value) -> None:
    """In-place write through an index: plain storage write, or a graph node when autograd is involved."""
    np_index = _index_of_0_dim(x, index) if x.dim() == 0 else _numpy_index(index, x.dim(), x._backend)
    if state.enabled and x.grad_fn is None and x._requires_grad and _writes_through_a_view(np_index):
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    check_inplace(x)
    _check_bounds(x, np_index)
    value = as_operand(value, "__setitem__", 2, "value")
    if isinstance(value, Tensor):
        same_backend((x, value))
    else:
        value = checked_scalar(value, x.dtype)
    if not _is_advanced(np_index) and (not isinstance(value, Tensor) or value._backend is x._backend):
        check_written(x, (value,), x._backend.getitem(x._data, np_index))  # (an expanded destination: refused)
    if isinstance(value, Tensor) and value.dtype != x.dtype and _is_advanced(np_index):
        raise RuntimeError(
            "Index put requires the source and destination dtypes match, got "
            f"{x.dtype.scalar_name} for the destination and {value.dtype.scalar_name} for the source."
        )
    if needs_graph(x, (value,)):
        cls = IndexPut if _is_advanced(np_index) and not _writes_through_a_view(np_index) else CopySlices
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
    _listed_inputs = (1, 2)  # (a number for either branch is wrapped as a tensor and listed, as torch does)

    @classmethod
    def _fast_apply(cls, args: tuple, st):
        """``apply`` for a plain bool condition and two plain branches of its shape and one dtype, outside anomaly
        and inference mode, with no tracer or saved-tensor hooks (``st.fast``): the selection and the node
        ``_link_outputs`` builds, without the general path's broadcasting and per-argument bookkeeping (a (32,
        200) float32 where with gradients: 17 -> 8 us, torch 7); anything else returns None."""
        if not st.fast:
            return None
        cond, a, b = args
        if type(cond) is not Tensor or type(a) is not Tensor or type(b) is not Tensor:
            return None
        cd, ad, bd = cond._data, a._data, b._data
        kind, dt = type(ad), ad.dtype
        if type(cd) is not kind or type(bd) is not kind or bd.dtype is not dt or cd.dtype != np.bool_:
            return None
        if bd.shape != ad.shape or cd.shape != ad.shape or cond._is_inference or a._is_inference or b._is_inference:
            return None
        backend = _BACKENDS.get(kind) or backend_for(ad)
        out = _new(Tensor)
        out._data = backend.where(cd, ad, bd, dt)
        edges = edges_of(args, cls)
        need_a, need_b = edges[1][0] is not None, edges[2][0] is not None
        if not st.enabled or not (need_a or need_b) or dt.kind not in "fcV":
            return out
        ctx = cls._backward_cls()
        ctx.needs_input_grad = (False, need_a, need_b)
        ctx.shapes = [ad.shape, bd.shape]
        ctx._input_meta = ((cd.shape, cd.dtype, backend), (ad.shape, dt, backend), (bd.shape, dt, backend))
        ctx._output_meta = ((ad.shape, dt, backend),)
        make_node(ctx, edges, out)
        ctx._saved = [saved_input_unhooked(cond)]
        return out

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


@declare(
    samples=(Sample(T(3, 4, dtype="bool"), T(3, 4), T(3, 4)), Sample(T(3, 1, dtype="bool"), T(3, 4), 0.5)),
    calls=(
        Call("where", lambda lib, a, b: lib.where(a > 0, a, b), T(2, 3), T(3), node="WhereBackward0"),
        Call("where_scalar", lambda lib, a: lib.where(a > 0, a, 0.0), T(2, 3), node="WhereBackward0"),
    ),
)
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


@declare(
    methods=True,
    samples=(Sample(T(3, 4)), Sample(T(3, 4), 0, True)),
    calls=(
        Call("sort", lambda lib, a: a.sort()[0], T(2, 3), node="SortBackward0"),
        Call(
            "sort_descending", lambda lib, a: lib.sort(a, dim=0, descending=True).values, T(3, 2), node="SortBackward0"
        ),
    ),
)
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


def _close_operand(input: Tensor, other, name: str) -> Tensor:  # noqa: A002
    """torch's checks for isclose/allclose: ``other`` is a tensor of ``input``'s dtype that broadcasts with it."""
    if not isinstance(other, Tensor):
        raise not_a_tensor(name, "other", 2, other)
    if other.dtype != input.dtype:
        raise RuntimeError(f"{input.dtype.scalar_name} did not match {other.dtype.scalar_name}")
    broadcast_shapes(input.shape, other.shape)
    return other


@declare(methods=True, differentiable=False)
def allclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:  # noqa: A002
    """``|input - other| <= atol + rtol * |other|`` everywhere."""
    b = _close_operand(input, other, "allclose")
    return bool(
        np.allclose(input._host(), b._host() if isinstance(b, Tensor) else b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    )


@declare(methods=True, differentiable=False)
def isclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:  # noqa: A002
    """Elementwise ``|input - other| <= atol + rtol * |other|``."""
    b = _close_operand(input, other, "isclose")
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
    if has_internal_overlap(input._data) and not needs_graph(input, (value,)):
        check_inplace(input)  # torch fills an expanded tensor (one value everywhere), which setitem refuses
        value = checked_scalar(value, input.dtype)
        input._backend.setitem(input._data, (Ellipsis,), value.item() if isinstance(value, Tensor) else value)
        input._bump_version()
        return input
    setitem(input, Ellipsis, value)
    return input


@declare(methods=("zero_",), name="_zero_")
def zero_(input: Tensor) -> Tensor:  # noqa: A002
    """Fill with zeros."""
    return fill_(input, 0)


def _copied_directly(input: Tensor, src: Tensor) -> bool:  # noqa: A002
    """``copy_``'s common call written straight into the storage (True when done): a source of the same shape, dtype
    (or another float width) and device, no graph to record (grad mode off, or neither side tracked), no tracer or
    forward-AD tangent to hand on, no expanded destination or partly overlapping source, nothing ``check_inplace``
    refuses. A running statistic's update under ``no_grad`` or an optimizer's parameter copy; anything else takes
    the general path, which reports errors and records the graph."""
    data, values = input._data, src._data
    kind = data.dtype.kind
    if (
        values.shape != data.shape
        or type(values) is not type(data)
        or not (values.dtype == data.dtype or kind == "f" == values.dtype.kind)
        or 0 in data.strides
        or input._lazy_conj
    ):
        return False
    st = state
    if st.tracer is not None or (input._is_inference and not st.inference):
        return False
    if st.enabled:
        base = input._base
        if (
            input._requires_grad
            or input.grad_fn is not None
            or src._requires_grad
            or src.grad_fn is not None
            or (base is not None and (base._requires_grad or base.grad_fn is not None))
        ):
            return False
    backend = input._backend
    if values is not data and backend.overlap(data, values) == "partial":
        return False
    backend.setitem(data, (Ellipsis,), values)
    input._bump_version()
    return True


@declare(methods=("copy_",), name="_copy_")
def copy_(input: Tensor, src, non_blocking: bool = False) -> Tensor:  # noqa: A002
    """Copy ``src`` (broadcast, cast, moved to this tensor's device) into this tensor."""
    if isinstance(src, Tensor) and _copied_directly(input, src):
        return input
    src = as_operand(src, "copy_", 1, "src")
    check_inplace(input)  # torch refuses a write into a view of a leaf before it looks at the shapes
    if isinstance(src, Tensor):
        check_written(input, (src,))  # (and one that overlaps the source)
        if input._base is not None and needs_graph(input, (src,)):
            check_view_change(input)  # (and a view that may not change with a graph)
        shape = broadcast_shapes(input.shape, src.shape)  # torch's message for sources that cannot broadcast
        if shape != tuple(input.shape):
            raise RuntimeError(
                f"output with shape {shape_str(input.shape)} doesn't match the broadcast shape {shape_str(shape)}"
            )
        if src.device != input.device:
            src = src.to(input.device)
        if input._base is None and needs_graph(input, (src,)):  # (a view's write is its base's CopySlices)
            value = src if src.dtype == input.dtype else src.to(input.dtype)
            rebase(input, lambda old: CopyBackwards.apply(old, value, (Ellipsis,)))
            return input
    setitem(input, Ellipsis, src)
    return input


# --- gather/scatter, index_* ops, masked ops, repeat_interleave, and their in-place forms --------------------------
def _check_index_dtype(index, name: str) -> None:
    if not isinstance(index, Tensor):
        raise not_a_tensor(name, "index", 3, index)
    if index._data.dtype not in (np.int64, np.int32):
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index")


def _check_along(x: Tensor, dim: int, index: Tensor, name: str, src=None) -> None:
    """torch's gather/scatter checks: same number of dims, index no larger than ``x`` (or ``src``) off ``dim``,
    every index in range."""
    if index.dim() != x.dim() and not (index.dim() <= 1 and x.dim() <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for d in range(index.dim()):
        if d != dim and index.shape[d] > x.shape[d]:
            raise RuntimeError(
                f"Size does not match at dimension {d} expected index {shape_str(index.shape)} to be smaller than "
                f"self {shape_str(x.shape)} apart from dimension {dim}"
            )
        if src is not None and index.shape[d] > src.shape[d]:
            raise RuntimeError(
                f"Expected index {shape_str(index.shape)} to be smaller than self {shape_str(x.shape)} apart from "
                f"dimension {dim} and to be smaller size than src {shape_str(src.shape)}"
            )
    size = x.shape[dim] if x.dim() else 1  # (gather and scatter take no negative index)
    index._backend.check_index(
        index._data, 0, size, None, functools.partial(_out_of_bounds, dim=dim, size=size, error=RuntimeError)
    )


class Gather(Function):
    node_name = "GatherBackward0"

    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.shape, ctx.dim = x.shape, dim
        ctx.save_for_backward(index)
        return Tensor._make(x._backend.gather(_nd(x._data), dim, _nd(index._data)).reshape(index.shape))

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        zeros = Tensor._make(g._backend.zeros(tuple(ctx.shape), g._data.dtype))
        return ScatterAdd.apply(zeros, ctx.dim, index, g), None, None


def _nd(data):
    """0-d storage as 1-d (gather and scatter treat a scalar as one element)."""
    return data.reshape(1) if data.ndim == 0 else data


@declare(
    methods=True,
    samples=(
        Sample(T(3, 4), 1, T(3, 2, dtype="int64", high=4)),
        Sample(T(3, 4), 0, T(2, 4, dtype="int64", high=3)),
    ),
)
def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:  # noqa: A002
    """``out[i][j] = input[index[i][j]][j]`` (``dim = 0``): values picked along ``dim`` at ``index``."""
    _check_index_dtype(index, "gather")
    dim = wrap_dim(dim, input.dim())
    _check_along(input, dim, index, "gather")
    return Gather.apply(input, dim, index)


class Scatter(Function):
    """``scatter`` of a tensor ``src``: a copy of ``x`` with ``src``'s elements written at ``index`` along ``dim``."""

    node_name = "ScatterBackward0"
    reduce = None

    @staticmethod
    def forward(ctx, x, dim, index, src):
        ctx.dim = dim
        ctx.save_for_backward(index)
        value = src._data if isinstance(src, Tensor) else src
        backend = x._backend
        out = backend.scatter(_nd(x._data), dim, _nd(index._data), _nd(value) if isinstance(src, Tensor) else value,
                              ctx._forward_cls.reduce)  # fmt: skip
        return Tensor._make(out.reshape(x.shape))

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        gx = ScatterValue.apply(g, ctx.dim, index, 0) if ctx.needs_input_grad[0] else None
        gsrc = gather(g, ctx.dim, index) if ctx.needs_input_grad[3] else None
        return gx, None, None, gsrc


class ScatterValue(Scatter):
    """``scatter`` of a number (torch's ``ScatterBackward1``)."""

    node_name = "ScatterBackward1"


class ScatterAdd(Scatter):
    node_name = "ScatterAddBackward0"
    reduce = "add"

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        gsrc = gather(g, ctx.dim, index) if ctx.needs_input_grad[3] else None
        return g, None, None, gsrc


class ScatterReduce(Scatter):
    """``scatter(..., reduce="add" | "multiply")`` (torch's deprecated form; no gradient, as in torch: its node
    is ``NotImplemented``, set on each subclass below, as ``node_name`` is not inherited)."""

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("derivative for aten::scatter is not implemented")


_SCATTER_REDUCE = {
    mode: type(f"Scatter{mode.title()}", (ScatterReduce,), {"reduce": mode, "node_name": "NotImplemented"})
    for mode in ("add", "multiply")
}


def _scatter_args(input: Tensor, dim: int, index: Tensor, src, name: str) -> tuple:  # noqa: A002
    _check_index_dtype(index, name)
    dim = wrap_dim(dim, input.dim())
    src = as_operand(src, name, 4, "src")
    if isinstance(src, Tensor) and src._data.dtype != input._data.dtype:
        raise RuntimeError(f"{name}(): Expected self.dtype to be equal to src.dtype")
    _check_along(input, dim, index, name, src if isinstance(src, Tensor) else None)
    return dim, src


@declare(
    methods=True,
    samples=(
        Sample(T(3, 4), 1, T(3, 1, dtype="int64", high=4), T(3, 1)),
        Sample(T(3, 4), 0, T(2, 4, dtype="int64", high=1), 2.5),
    ),
)
def scatter(input: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce=None) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``src`` (a tensor, or a number ``value``) written at ``index`` along ``dim``."""
    if src is None:
        src = value
    dim, src = _scatter_args(input, dim, index, src, "scatter")
    if reduce is not None:
        if reduce not in ("add", "multiply"):
            raise RuntimeError("reduce argument must be either add or multiply.")
        return _SCATTER_REDUCE[reduce].apply(input, dim, index, src)
    return (Scatter if isinstance(src, Tensor) else ScatterValue).apply(input, dim, index, src)


@declare(methods=True, samples=(Sample(T(3, 4), 1, T(3, 5, dtype="int64", high=4), T(3, 5)),))
def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``src`` added at ``index`` along ``dim`` (repeated indices add up)."""
    if not isinstance(src, Tensor):
        raise not_a_tensor("scatter_add", "src", 4, src)
    dim, src = _scatter_args(input, dim, index, src, "scatter")
    return ScatterAdd.apply(input, dim, index, src)


@declare(methods=("scatter_",), name="_scatter_")
def scatter_(input: Tensor, dim: int, index: Tensor, src=None, *, value=None, reduce=None) -> Tensor:  # noqa: A002
    """In-place ``scatter``: the result written into this tensor (checked first, so a refusal writes nothing)."""
    return write_inplace(input, lambda t: scatter(t, dim, index, src, value=value, reduce=reduce), (index, src))


@declare(methods=("scatter_add_",), name="_scatter_add_")
def scatter_add_(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:  # noqa: A002
    """In-place ``scatter_add``: the result written into this tensor (checked first, so a refusal writes nothing)."""
    return write_inplace(input, lambda t: scatter_add(t, dim, index, src), (index, src))


def _vector_index(index, name: str, dims: int) -> Tensor:
    if not isinstance(index, Tensor):
        raise not_a_tensor(name, "index", 3, index)
    if index._data.dtype not in (np.int64, np.int32):
        raise RuntimeError(f"{name}(): Expected dtype int32 or int64 for index")
    if index.dim() > 1:
        if name == "index_select":
            raise IndexError("index_select(): Index is supposed to be a vector")
        raise RuntimeError(
            "Index has to be a vector/scalar"
            if name == "index_fill_"
            else f"{name}(): Index is supposed to be a vector"
        )
    return index


def _check_range(index: Tensor, size: int, dim: int, error=IndexError, message=None, negative: bool = True) -> None:
    """Every index in ``[-size, size)`` (``[0, size)`` where torch takes no negative index), else torch's error."""
    make = functools.partial(_out_of_bounds, dim=dim, size=size, error=error, message=message)
    index._backend.check_index(index._data, -size if negative else 0, size, None, make)


class IndexSelect(Function):
    node_name = "IndexSelectBackward0"

    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.shape, ctx.dim = x.shape, dim
        ctx.save_for_backward(index)
        return Tensor._make(x._backend.index_select(x._data, dim, index._data))

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        zeros = Tensor._make(g._backend.zeros(tuple(ctx.shape), g._data.dtype))
        return IndexAdd.apply(zeros, ctx.dim, index, g, 1), None, None


@declare(
    methods=True, samples=(Sample(T(3, 4), 1, T(5, dtype="int64", high=4)), Sample(T(3, 4), 0, T(2, dtype="int64")))
)
def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:  # noqa: A002
    """The slices of ``input`` at ``index`` along ``dim`` (a copy)."""
    index = _vector_index(index, "index_select", input.dim())
    dim = wrap_dim(dim, input.dim())
    size = input.shape[dim] if input.dim() else 1
    _check_range(index, size, dim, IndexError, "index out of range in self", negative=False)
    index = index.reshape(-1) if index.dim() == 0 else index
    if input.dim() == 0:
        return IndexSelect.apply(input.reshape(1), 0, index).reshape(())
    return IndexSelect.apply(input, dim, index)


class IndexAdd(Function):
    node_name = "IndexAddBackward0"

    @staticmethod
    def forward(ctx, x, dim, index, source, alpha):
        ctx.dim, ctx.alpha = dim, alpha
        ctx.save_for_backward(index)
        src = source._data if alpha == 1 else (source * alpha)._data
        return Tensor._make(x._backend.index_add(x._data, dim, index._data, src))

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        gsrc = None
        if ctx.needs_input_grad[3]:
            gsrc = index_select(g, ctx.dim, index)
            if ctx.alpha != 1:
                gsrc = gsrc * ctx.alpha
        return g, None, None, gsrc, None


@declare(
    methods=True,
    samples=(
        Sample(T(4, 3), 0, T(5, dtype="int64", high=4), T(5, 3)),
        Sample(T(4, 3), 1, T(2, dtype="int64"), T(4, 2), alpha=2.0),
    ),
)
def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``alpha * source`` added at ``index`` along ``dim`` (repeated indices add up).
    An integer tensor takes ``alpha`` truncated to an integer, as torch does; a 0-d tensor is one element."""
    index = _vector_index(index, "index_add_", input.dim())
    dim = wrap_dim(dim, input.dim())
    if source._data.dtype != input._data.dtype:
        raise RuntimeError(
            f"index_add_(): self ({input.dtype.scalar_name}) and source ({source.dtype.scalar_name}) must have the "
            "same scalar type"
        )
    n = index.numel()
    if source.dim() and source.shape[dim] != n:
        raise RuntimeError(
            f"index_add_(): Number of indices ({n}) should be equal to source.size(dim): ({source.shape[dim]}), "
            f"for dim: {dim}"
        )
    if source.dim() != input.dim() or any(
        a != b for d, (a, b) in enumerate(zip(input.shape, source.shape)) if d != dim
    ):
        raise RuntimeError(
            "source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = "
            f"{shape_str(input.shape)} source.shape = {shape_str(source.shape)}"
        )
    if input._data.dtype.kind not in "fV":
        alpha = int(alpha)
    if input.dim() == 0:
        _check_range(index, 1, dim, RuntimeError, negative=False)
        return IndexAdd.apply(input.reshape(1), 0, index.reshape(-1), source.reshape(1), alpha).reshape(())
    _check_range(index, input.shape[dim], dim, RuntimeError, negative=False)
    return IndexAdd.apply(input, dim, index.reshape(-1), source, alpha)


@declare(methods=("index_add_",), name="_index_add_")
def index_add_(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:  # noqa: A002
    """In-place ``index_add``: the result written into this tensor (checked first, so a refusal writes nothing)."""
    return write_inplace(input, lambda t: index_add(t, dim, index, source, alpha=alpha), (index, source))


class IndexFill(Function):
    node_name = "IndexFillBackward0"

    @staticmethod
    def forward(ctx, x, dim, index, value):
        ctx.dim = dim
        ctx.save_for_backward(index)
        v = value._backend.to_host(value._data).item() if isinstance(value, Tensor) else value
        return Tensor._make(x._backend.index_fill(x._data, dim, index._data, v))

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        gx = IndexFill.apply(g, ctx.dim, index, 0) if ctx.needs_input_grad[0] else None
        gv = index_select(g, ctx.dim, index).sum() if ctx.needs_input_grad[3] else None
        return gx, None, None, gv


class IndexFillTensor(IndexFill):
    node_name = "IndexFillBackward1"


@declare(
    methods=True,
    samples=(Sample(T(4, 3), 0, T(2, dtype="int64", high=4), -1.5), Sample(T(4, 3), 1, T(2, dtype="int64"), T())),
)
def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:  # noqa: A002
    """A copy of ``input`` with the slices at ``index`` along ``dim`` set to ``value`` (a number or 0-d tensor)."""
    index = _vector_index(index, "index_fill_", input.dim())
    dim = wrap_dim(dim, input.dim())
    value = as_operand(value, "index_fill", 4, "value")
    if isinstance(value, Tensor) and value.dim():
        raise RuntimeError(
            f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with {value.dim()} dimension(s)."
        )
    _check_range(index, input.shape[dim] if input.dim() else 1, dim)
    cls = IndexFillTensor if isinstance(value, Tensor) else IndexFill
    if input.dim() == 0:  # one element, filled as a 1-element vector
        return cls.apply(input.reshape(1), 0, index.reshape(-1), value).reshape(())
    return cls.apply(input, dim, index.reshape(-1), value)


@declare(methods=("index_fill_",), name="_index_fill_")
def index_fill_(input: Tensor, dim: int, index: Tensor, value) -> Tensor:  # noqa: A002
    """In-place ``index_fill``: the result written into this tensor (checked first, so a refusal writes nothing)."""
    return write_inplace(input, lambda t: index_fill(t, dim, index, value), (index, value))


class IndexPutOp(Function):
    """``index_put``: a copy of ``x`` with ``values`` written (or, with ``accumulate``, added) at ``x[indices]``."""

    node_name = "IndexPutBackward0"

    @staticmethod
    def forward(ctx, x, values, index, accumulate):
        ctx.index, ctx.accumulate, ctx.values_shape = index, accumulate, values.shape
        backend = x._backend
        want = backend.getitem(x._data, index).shape
        if broadcast_shapes_or_none(tuple(want), tuple(values.shape)) != tuple(want):
            _raise_shape(index, list(want), list(values.shape))
        return Tensor._make(backend.index_put(x._data, index, values._data, accumulate))

    @staticmethod
    def backward(ctx, g):
        gx = None
        if ctx.needs_input_grad[0]:
            gx = g if ctx.accumulate else IndexPutOp.apply(g, zeros_of(g, ()), ctx.index, False)
        gv = g[ctx.index].sum_to_size(ctx.values_shape) if ctx.needs_input_grad[1] else None
        return gx, gv, None, None


def zeros_of(like: Tensor, shape: tuple) -> Tensor:
    return Tensor._make(like._backend.zeros(shape, like._data.dtype))


@declare(
    methods=True,
    samples=(
        Sample(T(4, 3), (T(2, dtype="int64", high=4),), T(2, 3)),
        Sample(T(4, 3), (T(3, dtype="int64", high=2), T(3, dtype="int64")), T(3), accumulate=True),
    ),
)
def index_put(input: Tensor, indices, values, accumulate: bool = False) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``input[indices] = values`` (``+=`` with ``accumulate``, repeated indices adding up)."""
    np_index = _numpy_index(tuple(indices), None, input._backend)
    values = as_operand(values, "index_put", 3, "values")
    if not isinstance(values, Tensor):
        values = Tensor._make(input._backend.full((), values, input._data.dtype))
    if values._data.dtype != input._data.dtype:
        raise RuntimeError(
            f"Index put requires the source and destination dtypes match, got {input.dtype.scalar_name} for the "
            f"destination and {values.dtype.scalar_name} for the source."
        )
    _check_bounds(input, np_index)
    return IndexPutOp.apply(input, values, np_index, bool(accumulate))


@declare(methods=("index_put_",), name="_index_put_")
def index_put_(input: Tensor, indices, values, accumulate: bool = False) -> Tensor:  # noqa: A002
    """In-place ``index_put``: the result written into this tensor (checked first, so a refusal writes nothing)."""
    return write_inplace(input, lambda t: index_put(t, indices, values, accumulate), (values,))


def _check_mask(mask, name: str) -> Tensor:
    if not isinstance(mask, Tensor):
        raise not_a_tensor(name, "mask", 2, mask)
    if mask._data.dtype != np.bool_:
        if name == "masked_select":
            raise RuntimeError("masked_select: expected BoolTensor for mask")
        raise RuntimeError(
            f"{name}_ only supports boolean masks, but got mask with dtype {_CPP.get(mask.dtype.name, mask.dtype.name)}"
        )
    return mask


_FIRST_OF_3 = (True, False, False)  # needs_input_grad of a masked_fill by a number


class MaskedFill(Function):
    node_name = "MaskedFillBackward0"
    _trusted = True  # (its gradient is ``g``'s dtype and ``x``'s shape; the 0-d tensor value's form is not)

    @classmethod
    def _fast_apply(cls, args: tuple, st):
        """``apply`` for a plain float Tensor and a bool mask of its shape on one device, filled with a number,
        outside anomaly and inference mode, with no tracer or saved-tensor hooks (``st.fast``; an attention mask's
        ``scores.masked_fill(mask, -inf)``): ``forward``'s result and ``_link_outputs``'s node built directly;
        anything else returns None."""
        x, mask, value = args
        if type(x) is not Tensor or type(mask) is not Tensor or not st.fast or cls is not MaskedFill:
            return None
        data, m = x._data, mask._data
        if type(m) is not type(data) or m.shape != data.shape or data.dtype.kind != "f" or mask._is_inference:
            return None
        result = _new(Tensor)
        result._data = (_BACKENDS.get(type(data)) or backend_for(data)).where(m, value, data, data.dtype)
        if st.enabled and (x._requires_grad or x.grad_fn is not None):
            ctx = cls._backward_cls()
            ctx.needs_input_grad = _FIRST_OF_3
            ctx.shape = x.shape
            make_node(ctx, (edge_of(x), NOT_A_TENSOR_INPUT, NOT_A_TENSOR_INPUT), result)
            ctx._saved = [saved_input_unhooked(mask)]
        return result

    @staticmethod
    def forward(ctx, x, mask, value):
        ctx.shape = x.shape
        ctx.save_for_backward(mask)
        backend = same_backend((x, mask))
        shape = broadcast_shapes(mask.shape, x.shape)  # (torch's size error names the mask tensor a)
        if isinstance(value, Tensor):  # a 0-d value: its storage, or its number when it lives on another device
            value = value._data if value._backend is backend else value.item()
        out = backend.where(mask._data, value, x._data, x._data.dtype)
        if tuple(out.shape) != shape:
            out = backend.copy(backend.broadcast_to(out, shape))
        return Tensor._make(out)

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        gv = where(mask, g, 0.0).sum() if ctx.needs_input_grad[2] else None
        if not ctx.needs_input_grad[0]:
            return None, None, gv
        data, m = g._data, mask._data
        if (
            nothing_records(state)
            and data.shape == m.shape == ctx.shape
            and type(data) is type(m)
            and data.dtype.kind in "fc"
        ):
            # (without create_graph and with nothing to sum back: ``where``'s storage call, not its node)
            return Tensor._make(g._backend.where(m, 0.0, data, data.dtype)), None, gv
        return where(mask, 0.0, g).sum_to_size(ctx.shape), None, gv


class MaskedFillTensor(MaskedFill):
    node_name = "MaskedFillBackward1"
    _trusted = False  # (the value's gradient is cast to its dtype and device)


@declare(samples=(Sample(T(3, 4), T(3, 4, dtype="bool"), -1.0), Sample(T(3, 4), T(4, dtype="bool"), T())))
def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``value`` (a number or 0-d tensor) where ``mask`` is True (broadcast)."""
    _check_fill_arguments("masked_fill", (input, mask, value), _FUNCTION_FORMS)
    return _masked_fill(input, mask, value)


@declare(methods=("masked_fill",), name="_masked_fill_method")
def masked_fill_method(self: Tensor, mask: Tensor, value) -> Tensor:
    """``self.masked_fill(mask, value)``: ``masked_fill``, with the argument error of torch's method, which lists
    the overloads without the tensor itself."""
    _check_fill_arguments("masked_fill", (mask, value), _METHOD_FORMS)
    return _masked_fill(self, mask, value)


@declare(methods=("masked_fill_",), name="_masked_fill_")
def masked_fill_(input: Tensor, mask: Tensor, value) -> Tensor:  # noqa: A002
    """In-place ``masked_fill``: the result written into this tensor (checked first, so a refusal writes nothing)."""
    _check_fill_arguments("masked_fill_", (mask, value), _METHOD_FORMS)
    return write_inplace(input, lambda t: _masked_fill(t, mask, value), (mask, value))


_METHOD_FORMS = ("Tensor mask, Tensor value", "Tensor mask, Number value")
_FUNCTION_FORMS = tuple(f"Tensor input, {form}" for form in _METHOD_FORMS)
_NUMBERS = (Tensor, bool, int, float, complex, np.bool_, np.number)  # what a ``Tensor`` or ``Number`` value takes


def _check_fill_arguments(op: str, args: tuple, forms: tuple) -> None:
    """torch's argument-parser error unless ``args`` are tensors, then a tensor or a number."""
    *tensors, value = args
    if not isinstance(value, _NUMBERS) or not all(isinstance(t, Tensor) for t in tensors):
        raise invalid_arguments(op, args, forms)


def _masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:  # noqa: A002
    """``masked_fill`` of arguments of the right types."""
    mask = _check_mask(mask, "masked_fill")
    value = as_operand(value, "masked_fill", 3, "value")
    value = checked_scalar(value, input.dtype)
    if isinstance(value, Tensor) and value.dim():
        raise RuntimeError(
            f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with {value.dim()} dimension(s)."
        )
    return (MaskedFillTensor if isinstance(value, Tensor) else MaskedFill).apply(input, mask, value)


class MaskedSelect(Function):
    node_name = "MaskedSelectBackward0"

    @staticmethod
    def forward(ctx, x, mask):
        shape = broadcast_shapes(x.shape, mask.shape)
        ctx.shape, ctx.full = x.shape, shape
        ctx.save_for_backward(mask)
        backend = x._backend
        data = backend.broadcast_to(x._data, shape)
        m = np.broadcast_to(mask._host(), shape)
        return Tensor._make(backend.getitem(data, (m,)))

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        zeros = zeros_of(g, tuple(ctx.full))
        return masked_scatter(zeros, mask, g).sum_to_size(ctx.shape), None


@declare(methods=True, samples=(Sample(T(3, 4), T(3, 4, dtype="bool")), Sample(T(3, 1), T(3, 4, dtype="bool"))))
def masked_select(input: Tensor, mask: Tensor) -> Tensor:  # noqa: A002
    """The elements of ``input`` (broadcast with ``mask``) where ``mask`` is True, as a 1-d tensor."""
    mask = _check_mask(mask, "masked_select")
    return MaskedSelect.apply(input, mask)


class MaskedScatter(Function):
    node_name = "MaskedScatterBackward0"

    @staticmethod
    def forward(ctx, x, mask, source):
        ctx.shape, ctx.source_shape = x.shape, source.shape
        ctx.save_for_backward(mask)
        return Tensor._make(x._backend.masked_scatter(x._data, mask._data, source._data))

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        gx = where(mask, 0.0, g).sum_to_size(ctx.shape) if ctx.needs_input_grad[0] else None
        gs = None
        if ctx.needs_input_grad[2]:
            picked = masked_select(g, mask)
            n = int(np.prod(ctx.source_shape, dtype=np.int64))
            rest = zeros_of(g, (n - picked.shape[0],))
            gs = _cat_flat(picked, rest).reshape(ctx.source_shape)
        return gx, None, gs


def _cat_flat(a: Tensor, b: Tensor) -> Tensor:
    return cat([a, b]) if b.shape[0] else a


@declare(
    methods=True, samples=(Sample(T(3, 4), T(3, 4, dtype="bool"), T(12)), Sample(T(3, 4), T(4, dtype="bool"), T(4, 4)))
)
def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:  # noqa: A002
    """A copy of ``input`` whose elements where ``mask`` is True take ``source``'s elements in order."""
    mask = _check_mask(mask, "masked_scatter")
    if source._data.dtype != input._data.dtype:
        raise RuntimeError(
            "masked_scatter: expected self and source to have same dtypes but got"
            f"{input.dtype.scalar_name} and {source.dtype.scalar_name}"
        )
    count = int(np.count_nonzero(np.broadcast_to(mask._host(), broadcast_shapes(input.shape, mask.shape))))
    if source.numel() < count:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    return MaskedScatter.apply(input, mask, source)


@declare(methods=("masked_scatter_",), name="_masked_scatter_")
def masked_scatter_(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:  # noqa: A002
    """In-place ``masked_scatter``: the result written into this tensor (checked first, so a refusal writes nothing)."""
    return write_inplace(input, lambda t: masked_scatter(t, mask, source), (mask, source))


@declare(methods=("fill_diagonal_",), name="_fill_diagonal_")
def fill_diagonal_(input: Tensor, fill_value, wrap: bool = False) -> Tensor:  # noqa: A002
    """Write ``fill_value`` on the main diagonal (all dims equal beyond 2-d; ``wrap`` restarts it every
    ``width + 1`` rows of a tall matrix), in place (torch's node: ``CopySlices``)."""
    if input.dim() < 2:
        raise RuntimeError("dimensions must larger than 1")
    height, width = input.shape[0], input.shape[1]
    if input.dim() > 2 and any(s != height for s in input.shape[1:]):
        raise RuntimeError("all dimensions of input must be of equal length")
    n = min(height, width)
    index = [np.arange(n)] * input.dim()
    if wrap and input.dim() == 2 and height > width + 1:
        step = width + 1
        flat = width * step + np.arange((input.numel() + step - 1) // step - n) * step
        rows, cols = np.unravel_index(flat, input.shape)
        index = [np.concatenate([index[0], rows]), np.concatenate([index[1], cols])]
    np_index = tuple(index)
    if isinstance(fill_value, Tensor):  # torch's parser takes a 0-d tensor as a Number, unless it requires grad
        if fill_value.dim() or fill_value.requires_grad:
            raise TypeError("fill_diagonal_(): argument 'fill_value' (position 1) must be Number, not Tensor")
        fill_value = fill_value.item()
    value = as_operand(fill_value, "fill_diagonal_", 1, "fill_value")
    check_inplace(input)
    check_written(input)
    if needs_graph(input, (value,)):
        return rebase(input, lambda old: CopySlices.apply(old, value, np_index))
    _assign(input._backend, input._data, np_index, value._data if isinstance(value, Tensor) else value)
    input._bump_version()
    return input


class RepeatIndex(Function):
    """``repeat_interleave`` of a repeats tensor alone: ``repeats[i]`` copies of ``i``."""

    @staticmethod
    def forward(ctx, repeats):
        return Tensor._make(repeats._backend.repeat_index(repeats._data))


@declare(
    methods=True,
    samples=(
        Sample(T(2, 3), 2),
        Sample(T(2, 3), 3, 1),
        Sample(T(3, 2), T(3, dtype="int64", high=3), 0),
        Sample(T(4), T(1, dtype="int64", high=3)),
    ),
)
def repeat_interleave(input: Tensor, repeats=None, dim=None, *, output_size=None) -> Tensor:  # noqa: A002
    """Each element (or slice along ``dim``) repeated ``repeats`` times in place (a number, or one count per
    element); ``repeat_interleave(counts)`` alone gives each index ``counts[i]`` times."""
    if repeats is None:  # torch.repeat_interleave(repeats)
        return RepeatIndex.apply(input)
    if dim is None:
        input, dim = input.flatten(), 0
    dim = wrap_dim(dim, input.dim())
    if isinstance(repeats, Tensor):
        if repeats.dim() > 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        if repeats.numel() == 1:  # one count for every element, as torch
            repeats = repeats.reshape(1).expand(input.shape[dim])
        if repeats.shape[0] != input.shape[dim]:
            raise RuntimeError(
                f"repeats must have the same size as input along dim, but got repeats.size(0) = {repeats.shape[0]} "
                f"and input.size({dim}) = {input.shape[dim]}"
            )
        if bool((repeats < 0).any()):
            raise RuntimeError("repeats can not be negative")
        return index_select(input, dim, RepeatIndex.apply(repeats))
    if repeats < 0:
        raise RuntimeError("Repeats must be non-negative")
    # torch's int path: unsqueeze, expand, a contiguous copy, then flatten the pair of dims (a view)
    shape = list(input.shape)
    expanded = input.unsqueeze(dim + 1).expand(*shape[: dim + 1], int(repeats), *shape[dim + 1 :])
    return expanded.clone().flatten(dim, dim + 1)
