"""In-place ops. Each bumps the version counter; under autograd the tensor is rebased onto a new node.

Rebasing: the op runs out of place on an alias holding the tensor's old value and history, then the result is
written back into the same storage (so views and numpy arrays sharing it see the change) and the tensor takes
the result's grad_fn, as torch does. Without autograd a table row writes straight into the tensor's storage.

An in-place op on a view rebases the view's base instead (torch's ``CopySlices``): the base's new node takes the
base's old history for the elements outside the view and the op's result for those inside, and every live view
of the base gets a new grad_fn (``AsStridedBackward0``) reading its elements from the base's new history. Where
a view sits in its base is worked out from the storage (``_Region``) only when such an op happens.

Before anything is written, torch's checks run, so no error leaves a tensor half-written: a leaf that requires
grad, a destination whose elements share memory (an expanded view), an operand partly overlapping the destination,
a result dtype that cannot be cast to the destination's, a broadcast that would grow the destination.
"""

from __future__ import annotations

import re
import warnings

import numpy as np

from .._tensor import NON_LEAF_GRAD_WARNING, Tensor, refuse_non_leaf_requires_grad
from .._types import check_castable
from ..autograd import forward_ad
from ..autograd.function import NO_GRAD_VIEW, Function, edge_of, make_node, may_skip_apply
from ..autograd.grad_mode import no_grad, state
from ._common import broadcast_shapes, shape_str

ERR_INFERENCE_INPLACE = (
    "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get a normal "
    "tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for more details."
)


def check_inplace(t: Tensor) -> None:
    """torch's ``check_inplace``: no in-place change of a leaf (or a view of one) that requires grad, nor of an
    inference tensor outside inference mode (its version is not tracked, so a graph could not see the change)."""
    if t._is_inference and not state.inference:
        raise RuntimeError(ERR_INFERENCE_INPLACE)
    if t._lazy_conj:
        raise RuntimeError(
            "numbagrad does not write through a lazily conjugated view (conj()); write to the tensor it conjugates, "
            "or use conj_physical() / resolve_conj() for a tensor of its own"
        )
    if not state.enabled:
        return
    base = t._base
    if base is not None and (t.requires_grad or base.requires_grad):
        _check_view_inplace(t, base)  # (torch checks how the view was made first)
    if t.grad_fn is None and t._requires_grad and base is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    if base is not None and base.grad_fn is None and base._requires_grad:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")


def check_written(t: Tensor, operands=(), destination=None) -> None:
    """torch's overlap checks before a write: the destination's elements (``destination``, a view of ``t``'s
    storage, by default all of it) must not share memory, and an operand must be the destination itself or not
    overlap it at all."""
    data = t._data if destination is None else destination
    if has_internal_overlap(data):
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a single memory "
            "location. Please clone() the tensor before performing the operation."
        )
    for o in operands:
        if (
            isinstance(o, Tensor)
            and o._data is not data
            and t._backend.overlap(data, o._data) == "partial"
            and _dense(data)
            and _dense(o._data)  # torch cannot tell for other layouts, and lets them through
        ):
            raise RuntimeError(
                "unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
                "single memory location. Please clone() the tensor before performing the operation."
            )


def _dense(data) -> bool:
    """torch's "non-overlapping and dense": the elements fill one block of memory, in some order of the dims."""
    expected = data.dtype.itemsize
    for stride, size in sorted((abs(s), n) for s, n in zip(data.strides, data.shape) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def has_internal_overlap(data) -> bool:
    """True when two elements of ``data`` are one memory location (a stride-0 dim of size > 1: expanded)."""
    return (
        data.size > 1
        and 0 in data.strides
        and any(stride == 0 and size > 1 for stride, size in zip(data.strides, data.shape))
    )


def check_result(t: Tensor, result_dtype: np.dtype, result_shape: tuple) -> None:
    """The result must fit the destination: castable dtype (torch's category rule) and the destination's shape."""
    check_castable(result_dtype, t._data.dtype)
    if tuple(result_shape) != t._data.shape:
        raise RuntimeError(
            f"output with shape {shape_str(t.shape)} doesn't match the broadcast shape "
            f"{shape_str(broadcast_shapes(t._data.shape, result_shape))}"
        )


def rebase(t: Tensor, op, saves_old: bool = True) -> Tensor:
    """Run ``op(old_value_of_t)`` with autograd, write the result into ``t`` and give ``t`` its history.

    ``saves_old``: the op's node may keep its input for backward, so the old value is a copy; else it is ``t``'s
    storage itself, read before it is overwritten (``relu_`` keeps only its result, as torch's). A result the
    node keeps is ``t``'s storage afterwards (``_saved_output_is``).

    A retained gradient follows the tensor to its new node (``retain_grad`` reports the newest version's
    gradient, as in torch); hooks registered before stay with the old version."""
    if not state.enabled:
        return _write_with_tangent(t, op)
    if t._base is not None:
        return _rebase_view(t, t._base, op)
    old = Tensor._make(t._backend.copy(t._data) if saves_old else t._data)
    old.grad_fn, old._output_nr, old._requires_grad = t.grad_fn, t._output_nr, t._requires_grad
    old._fw_grad = _tangent_before(t) if saves_old else t._fw_grad
    old_node = t.grad_fn
    result = op(old)
    check_result(t, result._data.dtype, result._data.shape)
    t._backend.setitem(t._data, (Ellipsis,), result._data)
    t._bump_version()
    if result._fw_grad is not None or t._fw_grad is not None:
        forward_ad.inplace_tangent(t, result)
    t.grad_fn, t._output_nr = result.grad_fn, result._output_nr
    _saved_output_is(result.grad_fn, t, result)
    if t._retains_grad:
        move_retained_grad(t, old_node, old._output_nr)
    if t._views:
        _regenerate_views(t, old.requires_grad)
    return t


def _tangent_before(t: Tensor):
    """A copy of ``t``'s forward-AD tangent (None without one), for the copy of ``t``'s old value that the op's
    node may save: ``inplace_tangent`` then writes the new tangent into ``t``'s own, and a backward inside the
    level must still read the old one with the old value (``(d * 2).mul_(d)``'s gradient)."""
    tangent = t._fw_grad
    return None if tangent is None else Tensor._make(tangent._backend.copy(tangent._data))


def _write_with_tangent(t: Tensor, op) -> Tensor:
    """``rebase`` in no-grad mode, where only a forward-AD tangent needs the op's call: the value and the tangent
    change (a view's tangent being a view of its base's, the base's too); no graph is recorded, so ``t`` and its
    base keep their history, as torch's do."""
    old = Tensor._make(t._data)  # (the op runs out of place: its result is written over t afterwards)
    old._fw_grad = t._fw_grad
    result = op(old)
    write_result(t, result)
    forward_ad.inplace_tangent(t, result)
    return t


def _saved_output_is(node, t: Tensor, result: Tensor | None = None) -> None:
    """The output ``node`` saved for backward (``relu_`` saves its result) is ``t`` now, as in torch: it takes
    ``t``'s version counter, so a later in-place change of ``t`` stops backward with torch's error, and ``t``'s
    storage, into which ``result`` (the op's out-of-place value) was just written: the result's own memory is
    freed, and a change through ``t.data`` reaches backward, as in torch."""
    saved = getattr(node, "_saved", None)
    if not saved:
        return
    counter = t._shared_version()
    for entry in saved:
        if entry is not None and entry.output_nr >= 0 and type(entry.tensor) is Tensor:
            entry.tensor._version_counter = counter
            entry.version = counter.value
            entry.output_ref = None  # (t lives on elsewhere: its storage never takes a gradient)
            data = entry.tensor._data
            if result is not None and data is result._data and data.dtype == t._data.dtype:
                entry.tensor._data = t._data


def move_retained_grad(t: Tensor, old_node, old_output_nr: int) -> None:
    """``t`` called ``retain_grad()`` and has a new grad_fn: its retained gradient now comes from the new node."""
    if old_node is None or t.grad_fn is None:
        return
    retained = old_node._retained
    if retained is not None and retained.get(old_output_nr) is not None and retained[old_output_nr]() is t:
        del retained[old_output_nr]
    t.grad_fn._retain_grad_of(t)


def needs_graph(t: Tensor, operands) -> bool:
    """Whether the op must be rebased: autograd follows ``t`` or an operand, or (forward AD) one carries a tangent
    that the rebase hands on."""
    if not may_skip_apply(state) and _has_tangent(t, operands):
        return True
    if not state.enabled:
        return False
    if t._requires_grad or t.grad_fn is not None:
        return True
    base = t._base  # a view made in no-grad mode of a base that requires grad: refused by the rebase
    if base is not None and (base._requires_grad or base.grad_fn is not None):
        return True
    return any(isinstance(o, Tensor) and (o._requires_grad or o.grad_fn is not None) for o in operands)


def _has_tangent(t: Tensor, operands) -> bool:
    return t._fw_grad is not None or any(isinstance(o, Tensor) and o._fw_grad is not None for o in operands)


def write_result(t: Tensor, result: Tensor) -> Tensor:
    """Write an out-of-place result into ``t`` (checked first), bumping its version."""
    check_result(t, result._data.dtype, result._data.shape)
    t._backend.setitem(t._data, (Ellipsis,), result._data)
    t._bump_version()
    return t


def random_fill_(t: Tensor, values: np.ndarray) -> Tensor:
    """Overwrite ``t`` with host ``values`` drawn by the caller (no graph; a leaf requiring grad refuses)."""
    check_inplace(t)
    check_written(t)
    t._backend.setitem(t._data, (Ellipsis,), t._backend.from_host(values.astype(t._data.dtype, copy=False)))
    t._bump_version()
    return t


def write_inplace(t: Tensor, op, operands=()) -> Tensor:
    """``t.<op>_(...)``: torch's checks, then ``op`` run out of place on ``t`` and written back (rebased onto the
    op's node under autograd), so an error leaves ``t`` untouched."""
    check_inplace(t)
    check_written(t, [o for o in operands if isinstance(o, Tensor)])
    if needs_graph(t, operands):
        return rebase(t, op)
    with no_grad():
        result = op(t)
    return write_result(t, result)


# --- in-place ops on views (torch's CopySlices and view regeneration) ----------------------------------------
class _Region:
    """Where a view's elements sit in its base: for each element of the view, the position of that element in
    the base's elements in row-major order. It is worked out from the storage geometry (addresses and strides
    recorded at construction) the first time a gradient needs it, so rebasing costs nothing until backward."""

    __slots__ = ("base_shape", "shape", "_geometry", "_index")

    def __init__(self, base: Tensor, view: Tensor) -> None:
        b, v = base._data, view._data
        backend = base._backend
        self.base_shape, self.shape = tuple(b.shape), tuple(v.shape)
        contiguous = backend.is_contiguous(b)
        self._geometry = (backend.data_ptr(b), b.strides, contiguous, backend.data_ptr(v), v.strides, b.dtype.itemsize)
        self._index = None

    @property
    def index(self) -> np.ndarray:
        """The view's positions in the flattened base, as a 1-d int64 array in the view's row-major order."""
        if self._index is None:
            base_ptr, base_strides, contiguous, view_ptr, view_strides, itemsize = self._geometry
            view_addr = _addresses(view_ptr, self.shape, view_strides).reshape(-1)
            if contiguous:
                self._index = (view_addr - base_ptr) // itemsize
            else:  # a base with its own strides: find each address among the base's elements
                base_addr = _addresses(base_ptr, self.base_shape, base_strides).reshape(-1)
                order = np.argsort(base_addr, kind="stable")
                self._index = order[np.searchsorted(base_addr[order], view_addr)]
        return self._index

    def take(self, t: Tensor) -> Tensor:
        """The view's elements read from ``t`` (a tensor of the base's shape), as a new tensor."""
        backend = t._backend
        flat = backend.reshape(_contiguous(t), (-1,))
        return Tensor._make(backend.reshape(backend.getitem(flat, (self.index,)), self.shape))

    def put(self, t: Tensor) -> Tensor:
        """Zeros of the base's shape with ``t`` (of the view's shape) added at the view's elements."""
        backend = t._backend
        n = int(np.prod(self.base_shape))
        values = backend.reshape(_contiguous(t), (-1,))
        return Tensor._make(backend.reshape(backend.index_add_zeros((n,), t._data.dtype, (self.index,), values),
                                            self.base_shape))  # fmt: skip

    def zero(self, t: Tensor) -> Tensor:
        """A copy of ``t`` (of the base's shape) with the view's elements set to zero."""
        backend = t._backend
        out = backend.copy(t._data)
        backend.setitem(backend.reshape(out, (-1,)), (self.index,), 0)
        return Tensor._make(out)


def _contiguous(t: Tensor):
    """``t``'s storage, copied when it is not row-major contiguous (so that it can be flattened as a view)."""
    backend = t._backend
    return t._data if backend.is_contiguous(t._data) else backend.copy(t._data)


def _addresses(ptr: int, shape: tuple, strides: tuple) -> np.ndarray:
    """The address of every element of an array laid out by ``shape`` and byte ``strides`` from ``ptr``."""
    addr = np.full((), ptr, dtype=np.int64)
    for k, (n, s) in enumerate(zip(shape, strides)):
        step = np.arange(n, dtype=np.int64) * s
        addr = addr + step.reshape((1,) * k + (n,) + (1,) * (len(shape) - k - 1))
    return np.broadcast_to(addr, shape)


class TakeRegion(Function):
    """A view's elements as a function of its base: the grad_fn a view gets when its base is rebased."""

    node_name = "AsStridedBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, base, region):
        ctx.region = region
        return region.take(base)

    @staticmethod
    def backward(ctx, g):
        return PutRegion.apply(g, ctx.region), None


class PutRegion(Function):
    """Zeros of the base's shape holding ``g`` at the view's elements (``TakeRegion``'s backward)."""

    node_name = "AsStridedScatterBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, g, region):
        ctx.region = region
        return region.put(g)

    @staticmethod
    def backward(ctx, gg):
        return TakeRegion.apply(gg, ctx.region), None


class ZeroRegion(Function):
    """``g`` with the view's elements zeroed: the gradient a rebased base passes to its old history."""

    node_name = "AsStridedScatterBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, g, region):
        ctx.region = region
        return region.zero(g)

    @staticmethod
    def backward(ctx, gg):
        return ZeroRegion.apply(gg, ctx.region), None


class CopySlicesView(Function):
    """The base after an in-place op on one of its views: the old base outside the view, ``value`` (the op's
    result) inside. Forward writes ``value`` into the view's storage ``dest``; the output aliases the base."""

    node_name = "CopySlices"

    @staticmethod
    def forward(ctx, old_base, value, dest, region):
        ctx.region = region
        old_base._backend.setitem(dest, (Ellipsis,), value._data)
        return Tensor._make(old_base._data)

    @staticmethod
    def backward(ctx, g):
        g_base = ZeroRegion.apply(g, ctx.region) if ctx.needs_input_grad[0] else None
        g_value = TakeRegion.apply(g, ctx.region) if ctx.needs_input_grad[1] else None
        return g_base, g_value, None, None


# How a view was made, when that refuses in-place changes of it (``Tensor._creation_meta``; autograd.function
# writes the custom Function's mark itself, as it sits below the ops).
_NO_GRAD_VIEW = NO_GRAD_VIEW
MULTI_OUTPUT_VIEW = "multi_output"
_CUSTOM_FUNCTION_VIEW = "custom_function"

_VIEW_ERRORS = {
    _NO_GRAD_VIEW: "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code "
    "by moving both the view and the inplace either both inside the no_grad block (if you don't want the inplace "
    "to be tracked) or both outside (if you want the inplace to be tracked).",
    MULTI_OUTPUT_VIEW: "This view is the output of a function that returns multiple views. Such functions do not "
    "allow the output views to be modified inplace. You should replace the inplace operation by an out-of-place "
    "one.",
    _CUSTOM_FUNCTION_VIEW: "This view was created inside a custom Function (or because an input was returned "
    "as-is) and the autograd logic to handle view+inplace would override the custom backward associated with the "
    "custom Function, leading to incorrect gradients. This behavior is forbidden. You can fix this by cloning the "
    "output of the custom Function.",
}


def _op_name(node) -> str:
    """A node's name as torch's view errors print it: ``UnbindBackward0`` is ``Unbind``."""
    return re.sub(r"Backward\d*$", "", node.name())


def _check_view_inplace(t: Tensor, base: Tensor) -> None:
    """torch's refusals of an in-place op that needs autograd on a view: one of several outputs of one node
    (``unbind``, ``split``), one made by a custom Function, one made in no-grad mode of a base requiring grad."""
    meta = t._creation_meta
    if meta is None and t.grad_fn is None and base.requires_grad:
        meta = _NO_GRAD_VIEW
    if meta is None:
        return
    raise RuntimeError(f"{_view_error_prefix(t, meta, 'is being')} {_VIEW_ERRORS[meta]}")


def _view_error_prefix(t: Tensor, meta: str, modified: str) -> str:
    """The first sentence of torch's refusal of an in-place change of the view ``t`` (``modified``: what was).
    It names the node that made the view, also once ``_regenerate_views`` has replaced that node."""
    fn = t.__dict__["grad_fn"] if type(t) is _StaleView else t.grad_fn
    output_nr = t._output_nr
    if type(fn) is _ModifiedView._backward_cls:
        fn, output_nr = fn.made_by
    if fn is None:
        return f"A view was created in no_grad mode and {modified} modified inplace with grad mode enabled."
    output = f"Output {output_nr} of {_op_name(fn)} is a view"
    if meta == _NO_GRAD_VIEW:  # a view (made with grad) of a view made in no-grad mode
        made = "of a view which was created in no_grad mode"
        return f"{output} {made} and {modified} modified inplace with grad mode enabled."
    return f"{output} and {modified} modified inplace."


class _ModifiedView(Function):
    """The grad_fn of a view that may not follow its base's new history (a piece of ``unbind``/``split``, a
    custom Function's view, a view made in no-grad mode): differentiating through it raises torch's error, which
    torch raises when the view's grad_fn is next read. ``_regenerate_views`` builds its nodes directly."""

    node_name = "Error"

    @staticmethod
    def forward(ctx, base, message):
        ctx.message = message
        return Tensor._make(base._data)

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError(ctx.message)


class _StaleView(Tensor):
    """A view given a ``_ModifiedView`` node by ``_regenerate_views``: reading its ``grad_fn`` (``is_leaf``, an op
    recording a graph through it, backward from it) raises torch's error, which torch raises where it
    regenerates the view's grad_fn, at that read. The view's class changes rather than ``Tensor.grad_fn``
    becoming a property, so that reading ``grad_fn`` of every other tensor stays a plain attribute read. The
    node stays in the instance's dict, where the engine reaches it through the base's graph."""

    @property  # type: ignore[override]
    def grad_fn(self):
        raise RuntimeError(self.__dict__["grad_fn"].message)

    @grad_fn.setter
    def grad_fn(self, node) -> None:
        self.__dict__["grad_fn"] = node

    @property
    def requires_grad(self) -> bool:
        """True, without reading ``grad_fn``: torch answers from the view's base."""
        return True

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        refuse_non_leaf_requires_grad(value)

    @property
    def grad(self) -> Tensor | None:
        """As a non-leaf's, without reading ``grad_fn`` (torch's ``.grad`` does not raise here)."""
        if self._grad is None and not self._retains_grad:
            warnings.warn(NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        Tensor.grad.fset(self, value)


def _rebase_view(t: Tensor, base: Tensor, op) -> Tensor:
    """``op`` applied in place to the view ``t`` of ``base``: base gets a ``CopySlices`` node, its views new
    grad_fns. The op runs on a copy of the view's values (which its backward may save), so the write into the
    shared storage cannot change what backward reads. As in torch's ``CopySlices``, that copy's history is the
    base's old history read at the view's elements, not the view's own node: hooks on the view's old node do not
    run."""
    _check_view_inplace(t, base)
    old_base = Tensor._make(base._data)
    old_base.grad_fn, old_base._output_nr, old_base._requires_grad = base.grad_fn, base._output_nr, base._requires_grad
    region = _Region(base, t)
    old = Tensor._make(t._backend.copy(t._data))
    if old_base.requires_grad:
        old.grad_fn = _take_region_node(old_base, region)
    old._fw_grad = _tangent_before(t)
    result = op(old)
    check_result(t, result._data.dtype, result._data.shape)
    if result._fw_grad is not None or t._fw_grad is not None:
        forward_ad.inplace_tangent(t, result)
    new = CopySlicesView.apply(old_base, result, t._data, region)
    base.grad_fn, base._output_nr = new.grad_fn, 0
    if base._retains_grad:
        move_retained_grad(base, old_base.grad_fn, old_base._output_nr)
    t._bump_version()
    _saved_output_is(result.grad_fn, t, result)
    _regenerate_views(base, old_base.requires_grad)
    return t


def check_view_change(view: Tensor) -> None:
    """torch's refusals (``_check_view_inplace``) of a change of ``view`` that needs a graph, for a caller that
    checks before it writes (``copy_``) or links (a custom Function's ``mark_dirty``)."""
    _check_view_inplace(view, view._base)


def rebase_onto_view(view: Tensor) -> None:
    """A custom Function changed ``view`` in place (``mark_dirty``) and is its grad_fn now: the base takes a
    ``CopySlices`` node holding the view's new history, and its views new grad_fns, as after a built-in in-place
    op on the view (``_rebase_view``)."""
    base = view._base
    old_base = Tensor._make(base._data)
    old_base.grad_fn, old_base._output_nr, old_base._requires_grad = base.grad_fn, base._output_nr, base._requires_grad
    value = Tensor._make(view._data)
    value.grad_fn, value._output_nr = view.grad_fn, view._output_nr
    new = CopySlicesView.apply(old_base, value, view._data, _Region(base, view))
    base.grad_fn, base._output_nr = new.grad_fn, 0
    if base._retains_grad:
        move_retained_grad(base, old_base.grad_fn, old_base._output_nr)
    _regenerate_views(base, old_base.requires_grad)


def _regenerate_views(base: Tensor, had_history: bool) -> None:
    """Point every live view of ``base`` at the base's new history (torch does this lazily, on the view's next
    grad_fn access; here it happens at the in-place op, the only time the history changes). A view that may not
    follow (see ``_check_view_inplace``; ``had_history``: the base required grad before the op) gets a node that
    raises torch's error when differentiated through."""
    has_history = base.requires_grad
    live = []
    for ref in base._views:
        v = ref()
        if v is None:
            continue
        live.append(ref)
        if not has_history or type(v) is _StaleView or type(v.grad_fn) is _ModifiedView._backward_cls:
            continue
        meta = v._creation_meta
        if meta is None and v.grad_fn is None and had_history:
            meta = _NO_GRAD_VIEW
        if meta is not None:
            node = _ModifiedView._backward_cls()
            node.message = _modified_view_message(v, meta)
            node.made_by = (v.grad_fn, v._output_nr)
            make_node(node, (edge_of(base), (None, 0)))
            node.needs_input_grad = (True, False)
        else:
            node = _take_region_node(base, _Region(base, v))
        old_node, old_output_nr = v.grad_fn, v._output_nr
        v.grad_fn, v._output_nr = node, 0
        if v._retains_grad:
            move_retained_grad(v, old_node, old_output_nr)
        if meta is not None and type(v) is Tensor:
            v.__class__ = _StaleView
            v._requires_grad = True  # (ops test it before grad_fn: one without a graph, in no-grad mode, reads none)
    base._views = live
    base._views_pruned_at = len(live)


def _take_region_node(base: Tensor, region: _Region):
    """A ``TakeRegion`` node reading ``region`` from ``base``'s history, built without running its forward (the
    values are already at hand): its region's positions are worked out only if backward reaches it."""
    node = TakeRegion._backward_cls()
    node.region = region
    make_node(node, (edge_of(base), (None, 0)))
    node.needs_input_grad = (True, False)
    return node


def regenerate_after_write(t: Tensor) -> None:
    """After an in-place write without a graph (grad mode off) to ``t`` or a view of it: torch regenerates the
    grad_fn of every view of a base that requires grad once its version has changed (a view's old node, with
    the hooks registered on it, leaves the graph; a view that may not follow raises), so the views here get their
    new grad_fns now."""
    root = t._base if t._base is not None else t
    if root._views and (root._requires_grad or root.grad_fn is not None):
        _regenerate_views(root, True)


def _modified_view_message(v: Tensor, meta: str) -> str:
    prefix = _view_error_prefix(v, meta, "its base or another view of its base has been")
    return f"{prefix} {_VIEW_ERRORS[meta]}"
