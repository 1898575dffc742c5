"""Forward-mode AD, as torch's ``torch.autograd.forward_ad``: dual tensors carry a tangent through every op.

A dual tensor is an ordinary Tensor whose ``_fw_grad`` holds its tangent at the one active level (torch supports a
single level too: nesting is its error). While a level is active in a thread, this module's ``_Dispatcher`` is that
thread's ``state.tracer``: ``Function.apply`` (and every fast path, which runs only under ``state.fast`` or asks
``function.may_skip_apply`` first) hands it each call, so outside a level the eager hot path pays nothing more than
that one existing check. A call
without a dual input runs as usual; with one, the output's tangent comes from, in order:

- the Function's own ``jvp`` (custom Functions, torch's ``jvp`` staticmethod protocol);
- an elementwise table row: ``sum_i d out / d x_i * t_i``, from the row's per-input gradient formulas (the same
  tensor formulas double backward uses, with the tangent where the incoming gradient goes). On complex tensors
  those formulas are the holomorphic derivative unconjugated (backward conjugates it, a tangent must not), so a
  complex tangent is ``f'(z) * t`` as torch's;
- an op linear in its floating-point tensor inputs (views, shape ops, sums, indexing, concatenation): the op
  applied to the tangents, so a view's tangent is the same view of the tangent; an op linear in each operand
  separately (``_multilinear``: the matrix products): the sum of the op with one operand replaced by its tangent;
- otherwise the double-vjp identity on that one op: ``u -> J^T u`` is linear in ``u``, and its vjp with the tangent
  is ``J t``. This needs the op's backward to be differentiable; where it is not, torch's NotImplementedError.

Tangents are computed with grad mode as the caller has it, so a backward pass run inside a level
(``autograd.grad(..., create_graph=True)``) carries tangents through the backward's own ops: forward-over-reverse.
In-place ops update the destination's tangent (``ops.inplace`` calls ``inplace_tangent``).

Where numbagrad differs from torch: the level is global, as torch's is, but tangents flow through the ops of the
thread that entered it (the dispatcher lives in that thread's autograd state); a tangent computed by the double-vjp
rule costs two backward passes of the op (torch has a formula per op).
"""

from __future__ import annotations

import re
import weakref
from typing import NamedTuple

from .._tensor import Tensor
from .engine import grad
from .function import _apply_general, _overridden
from .grad_mode import _DecoratorContextManager, enable_grad, state

__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual"]

_current_level = -1
_dual_tensors: list = []  # weak references to every tensor given a tangent at the current level (cleared at exit)

#: Ops whose output is linear in their floating-point tensor inputs (all other arguments held fixed): their
#: tangent is the op itself applied to the inputs' tangents (zeros where an input has none).
LINEAR_NODES = frozenset(
    {
        "AliasBackward0",
        "CatBackward0",
        "CloneBackward0",
        "CumsumBackward0",
        "ExpandBackward0",
        "FlipBackward0",
        "GatherBackward0",
        "IndexAddBackward0",
        "IndexBackward0",
        "IndexFillBackward1",
        "IndexPutBackward0",
        "IndexSelectBackward0",
        "MaskedFillBackward1",
        "MaskedScatterBackward0",
        "MaskedSelectBackward0",
        "MeanBackward0",
        "MeanBackward1",
        "PermuteBackward0",
        "RepeatBackward0",
        "RollBackward0",
        "ScatterAddBackward0",
        "ScatterBackward0",
        "SelectBackward0",
        "SliceBackward0",
        "SplitBackward0",
        "SplitWithSizesBackward0",
        "SqueezeBackward0",
        "SqueezeBackward1",
        "StackBackward0",
        "SumBackward0",
        "SumBackward1",
        "TBackward0",
        "ToCopyBackward0",
        "TransposeBackward0",
        "UnbindBackward0",
        "UnsafeViewBackward0",
        "UnsqueezeBackward0",
        "ViewBackward0",
        "WhereBackward0",
    }
)

_LINEAR_MODULES = frozenset({"numbagrad.ops.shape", "numbagrad.ops.reduction", "numbagrad.ops.indexing"})

ERR_NO_LEVEL = (
    "Trying to create a dual Tensor for forward AD but no level exists, make sure to enter_dual_level() first."
)
ERR_NO_JVP = "You must implement the jvp function for custom autograd.Function to use it with forward mode AD."


class UnpackedDualTensor(NamedTuple):
    """What ``unpack_dual`` returns: the primal (a view of the tensor, without tangent) and the tangent (or None)."""

    primal: Tensor
    tangent: Tensor | None


def enter_dual_level() -> int:
    """Enter the forward-AD level (there is one: torch does not support nesting) and return its number, 0."""
    global _current_level
    if _current_level >= 0:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _current_level = 0
    _Dispatcher.install()
    return _current_level


def exit_dual_level(*, level: int | None = None) -> None:
    """Leave the current level: every tangent made in it is deleted."""
    global _current_level
    if level is None:
        level = _current_level
    if level < 0:
        raise RuntimeError("Dual level must be a positive number.")
    if level != _current_level:
        raise RuntimeError(
            "Trying to exit a forward AD level that was not the last one that was created. This is not supported."
        )
    _Dispatcher.uninstall()
    for ref in _dual_tensors:
        t = ref()
        if t is not None:
            t.__dict__.pop("_fw_grad", None)
    _dual_tensors.clear()
    _current_level = level - 1


def _level_of(level: int | None, op: str) -> int:
    """The level asked for (the current one by default), checked as torch checks it: a level that exists."""
    if level is None or level < 0:
        return _current_level if level is None else level
    if _current_level < 0:
        raise RuntimeError(
            "Trying to access a forward AD level with an invalid index. This index was either not created or is "
            "already deleted."
        )
    if level != _current_level:
        raise RuntimeError(f"Invalid level given to {op}")
    return level


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """A new alias of ``tensor`` (a view, differentiable in reverse mode) carrying ``tangent`` as its tangent."""
    if _level_of(level, "_make_dual") < 0:
        raise RuntimeError(ERR_NO_LEVEL)
    if tensor._data.dtype.kind not in "fc":
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if tangent._data.dtype.kind not in "fc":
        raise ValueError(f"Expected tangent to be floating point or complex, but got: {tangent.dtype}")
    if tensor._fw_grad is not None:
        raise RuntimeError(
            "Making a dual Tensor based on a Tensor that already has a forward gradient at the same level "
            f"{_current_level} is not supported."
        )
    _check_tangent_shape(tensor, tangent)
    if tangent.device != tensor.device:
        raise RuntimeError(
            f"Trying to set a forward gradient that has a different device than that of the original Tensor, this is "
            f"not supported. Tensor is on {tensor.device} while the given forward gradient is on {tangent.device}."
        )
    with _untraced():
        dual = tensor.view_as(tensor)
    _set_tangent(dual, tangent)
    return dual


def unpack_dual(tensor: Tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """``(primal, tangent)``: the primal is a view of ``tensor`` without tangent, the tangent is returned as-is."""
    if level is None:
        level = _current_level
    if level < 0 or _current_level < 0:  # outside any level: the tensor itself, as torch
        return UnpackedDualTensor(tensor, None)
    if level != _current_level and tensor._fw_grad is not None:
        raise RuntimeError("Invalid level given to _fw_primal")
    return UnpackedDualTensor(_alias(tensor), tensor._fw_grad)


def _alias(tensor: Tensor) -> Tensor:
    with _untraced():
        return tensor.view_as(tensor)


class dual_level(_DecoratorContextManager):  # noqa: N801 - torch's name
    """``with dual_level():`` enters the forward-AD level and leaves it (deleting its tangents) at the end."""

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc) -> None:
        exit_dual_level()


# --- tangents ----------------------------------------------------------------------------------------------------
def _check_tangent_shape(tensor: Tensor, tangent: Tensor) -> None:
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the original Tensor, this is "
            f"not supported. Tensor is of size {list(tensor.shape)} while the given forward gradient is of size "
            f"{list(tangent.shape)}."
        )


def _set_tangent(t: Tensor, tangent: Tensor) -> None:
    """Give ``t`` its tangent (registered, so leaving the level deletes it); a saved alias of ``t`` in its own node
    gets it too, so a backward run inside the level sees it (``function.SavedTensor.unpack``)."""
    t._fw_grad = tangent
    _dual_tensors.append(weakref.ref(t))
    node = t.grad_fn
    saved = getattr(node, "_saved", None) if node is not None else None
    if saved:
        for entry in saved:
            if (
                entry is not None
                and entry.output_nr == t._output_nr
                and type(entry.tensor) is Tensor
                and entry.tensor._data is t._data
            ):
                entry.tensor._fw_grad = tangent
                _dual_tensors.append(weakref.ref(entry.tensor))


def inplace_tangent(t: Tensor, result: Tensor) -> None:
    """After ``t`` was overwritten in place by ``result``: ``t``'s tangent becomes ``result``'s (written into the
    existing tangent, as torch does, so views of it see the change)."""
    new = result._fw_grad
    old = t._fw_grad
    if new is None and old is None:
        return
    if new is None:
        new = _zeros_like(t)
    if old is not None and old.shape == new.shape and old.dtype == new.dtype:
        with _untraced():
            old._backend.setitem(old._data, (Ellipsis,), new._data)
            old._bump_version()
    else:
        with _untraced():
            _set_tangent(t, new.clone() if new.shape == t.shape else new.expand(t.shape).clone())


class _untraced:
    """Run library code inside a level without tangents being propagated (the dispatcher is switched off)."""

    def __enter__(self) -> None:
        self.prev = state.tracer
        if type(self.prev) is _Dispatcher:
            state.tracer = None

    def __exit__(self, *exc) -> None:
        state.tracer = self.prev


def _zeros_like(t: Tensor) -> Tensor:
    return Tensor._make(t._backend.zeros(t._data.shape, t._data.dtype))


def _is_float(a) -> bool:
    return isinstance(a, Tensor) and a._data.dtype.kind in "fc"


def _walk(args) -> list:
    """Every tensor among ``args``, looking one level into lists and tuples (``cat``'s tensors)."""
    found = []
    for a in args:
        if isinstance(a, Tensor):
            found.append(a)
        elif type(a) in (list, tuple):
            for b in a:
                if isinstance(b, Tensor):
                    found.append(b)
    return found


def _substitute(args, fn) -> tuple:
    """``args`` with each floating-point tensor ``a`` (one level into lists and tuples) replaced by ``fn(a)``."""
    out = []
    for a in args:
        if _is_float(a):
            out.append(fn(a))
        elif type(a) in (list, tuple) and any(isinstance(b, Tensor) for b in a):
            out.append(type(a)(fn(b) if _is_float(b) else b for b in a))
        else:
            out.append(a)
    return tuple(out)


def _op_name(cls) -> str:
    """torch's name for the op: the table row's, else the node name without ``Backward`` (``CumprodBackward0``:
    ``cumprod``)."""
    row = getattr(cls, "row", None)
    if row is not None:
        return row.name
    stem = re.sub(r"Backwards?\d*$", "", cls._backward_cls.__name__) or cls.__name__
    return re.sub(r"(?<!^)(?=[A-Z])", "_", stem).lower()


def _unsupported(cls) -> NotImplementedError:
    """torch's error for an op without a forward derivative (as for its ops whose derivative is not implemented)."""
    return NotImplementedError(f"Trying to use forward AD with aten::{_op_name(cls)} that does not support it.")


# --- the dispatcher ----------------------------------------------------------------------------------------------
class _Dispatcher:
    """``state.tracer`` while a level is active: each op call comes here (with the tracer unset while it runs)."""

    _installed: list = []  # (dispatcher, the tracer it replaced) per thread that entered the level

    @classmethod
    def install(cls) -> None:
        d = cls()
        cls._installed.append((d, state.tracer))
        state.tracer = d

    @classmethod
    def uninstall(cls) -> None:
        for d, prev in cls._installed:
            if state.tracer is d:
                state.tracer = prev
        cls._installed.clear()

    def __call__(self, cls, args: tuple, kwargs: dict):
        st = state
        st.tracer = None
        try:
            for a in _walk((*args, *kwargs.values())):
                if a._fw_grad is not None:
                    return _apply_dual(cls, args, kwargs)
            return cls.apply(*args, **kwargs)
        finally:
            st.tracer = self

    def creation(self, fn, args: tuple, kwargs: dict):
        """A creation function (``zeros``, ``randn``): nothing to differentiate."""
        return fn(*args, **kwargs)

    def graph_break(self, reason: str) -> None:
        """Only a compile trace stops at a graph break; forward mode has nothing to stop."""


def _outputs(output) -> list:
    return list(output) if type(output) is tuple else [output]


def _apply_dual(cls, args: tuple, kwargs: dict):
    """One op call with at least one dual input: the primal output, then its tangent(s) (see the module doc)."""
    if kwargs or cls._binds_defaults:
        args = cls._bind(args, kwargs)
    if not cls.__module__.startswith("numbagrad.") or "jvp" in _overridden(cls):
        return _apply_custom(cls, args)
    output = cls.apply(*args)
    outs = [o for o in _outputs(output) if _is_float(o)]
    if not outs:
        return output
    row_grads = getattr(cls, "_tensor_grads", None)
    if row_grads is not None:
        tangents = [_elementwise_tangent(cls, args, outs[0])]
    elif _is_linear(cls, args):
        tangents = [t for t in _outputs(cls.apply(*_substitute(args, _tangent_or_zeros))) if _is_float(t)]
    elif getattr(cls, "_multilinear", False):
        tangents = [_multilinear_tangent(cls, args)]
    else:
        tangents = _double_vjp_tangents(cls, args)
    for o, t in zip(outs, tangents):
        if o._fw_grad is None:  # (an input returned as-is keeps the tangent it has)
            _set_tangent(o, t if t is not None else _zeros_like(o))
    return output


def _is_linear(cls, args: tuple) -> bool:
    """Whether the op is one of ``LINEAR_NODES`` (by its node name, among the shape, reduction and indexing ops: a
    composite elsewhere may print a view's node name) and linear here: ``where`` with a number operand is affine."""
    if cls.__module__ not in _LINEAR_MODULES or cls._backward_cls.__name__ not in LINEAR_NODES:
        return False
    if cls._backward_cls.__name__ == "WhereBackward0":
        return all(isinstance(a, Tensor) for a in args)
    return True


def _multilinear_tangent(cls, args: tuple) -> Tensor:
    """An op linear in each tensor operand separately (``_multilinear``, a matrix product): the sum, over the
    operands with a tangent, of the op with that operand replaced by its tangent."""
    total = None
    for i, a in enumerate(args):
        if isinstance(a, Tensor) and a._fw_grad is not None:
            term = cls.apply(*args[:i], a._fw_grad, *args[i + 1 :])
            total = term if total is None else total + term
    return total


def _tangent_or_zeros(a: Tensor) -> Tensor:
    return a._fw_grad if a._fw_grad is not None else _zeros_like(a)


def _elementwise_tangent(cls, args: tuple, out: Tensor) -> Tensor:
    """``sum_i d out / d x_i * t_i`` from the row's gradient formulas (``g * d out / d x_i``, with ``g = t_i``). A
    row with an input torch has no derivative for (``no_formula``: zeta, igamma) has no forward rule in torch at all."""
    if not cls.differentiable or cls.row.no_formula:
        raise _unsupported(cls)
    n = cls.arity
    inputs, params = args[:n], args[n:]
    total = None
    for i in range(n):
        a = inputs[i]
        if not isinstance(a, Tensor) or a._fw_grad is None:
            continue
        t = a._fw_grad
        term = t if cls._passthrough[i] else cls._tensor_grads[i](t, out, *inputs, *params)
        if not isinstance(term, Tensor):
            term = Tensor._make(t._backend.full(t._data.shape, term, t._data.dtype))
        total = term if total is None else total + term
    if total is None:
        return _zeros_like(out)
    if total.dtype != out.dtype:
        total = total.to(out.dtype)
    if tuple(total.shape) != tuple(out.shape):
        total = total.expand(out.shape)
    return total


def _double_vjp_tangents(cls, args: tuple) -> list:
    """``J t`` for one op: the vjp ``u -> J^T u`` of fresh copies of the inputs is linear in ``u``, and its own
    vjp, with the tangents, is ``J t``. An op whose backward is not differentiable raises torch's error."""
    duals = list({id(a): a for a in _walk(args) if _is_float(a) and a._fw_grad is not None}.values())  # each once
    # the tangent keeps a graph to whatever it depends on that requires grad (reverse-over-forward): the input
    # tangents, and the inputs themselves, stood in for by differentiable aliases
    create = state.enabled and any(a._fw_grad.requires_grad or a.requires_grad for a in duals)
    copies = {id(a): a.view_as(a) if create and a.requires_grad else _internal_leaf(a.detach()) for a in duals}
    with enable_grad():
        new_args = _substitute(args, lambda a: copies.get(id(a), a))
        outs = [o for o in _outputs(cls.apply(*new_args)) if _is_float(o)]
        linked = [o for o in outs if o.requires_grad]
        if not linked:
            return [None] * len(outs)
        # (any u will do, J^T u being linear in u; ones, not zeros, for a backward computed piecewise in the sign
        # of its incoming gradient, as logcumsumexp's is, whose derivative at u = 0 is the wrong piece's)
        us = [_internal_leaf(Tensor._make(o._backend.full(o._data.shape, 1, o._data.dtype))) for o in linked]
        inputs = [copies[id(a)] for a in duals]
        try:
            vjps = grad(linked, inputs, us, create_graph=True, allow_unused=True)
        except RuntimeError as error:
            raise _unsupported(cls) from error
        pairs = [(v, a._fw_grad) for v, a in zip(vjps, duals) if v is not None and _depends_on_u(cls, v)]
        if not pairs:
            return [None] * len(outs)
        try:
            jvps = grad([v for v, _ in pairs], us, [t for _, t in pairs], create_graph=create, allow_unused=True)
        except RuntimeError as error:
            raise _unsupported(cls) from error
    by_output = dict(zip([id(o) for o in linked], jvps))
    return [by_output.get(id(o)) for o in outs]


def _depends_on_u(cls, vjp: Tensor) -> bool:
    """Whether a vjp ``J^T u`` has a graph back to ``u``. Being linear in ``u``, one without a graph is a constant:
    zero (relu's gradient with respect to its input: an input it does not depend on, zero terms to the tangent),
    or else a backward that is not differentiable (``once_differentiable``), torch's error."""
    if vjp.requires_grad:
        return True
    if not vjp.any().item():
        return False
    raise _unsupported(cls)


def _internal_leaf(t: Tensor) -> Tensor:
    """``t`` as a leaf requiring grad that is this module's own, never the user's: marked as a transform's leaf,
    so that a tangent whose graph reaches it does not count as reaching the user's leaves (``numbagrad.func``'s
    vmap keeps a result's graph only where it does)."""
    t.requires_grad_(True)
    t._made_by_transform = True
    return t


def _apply_custom(cls, args: tuple):
    """A custom Function with a dual input: forward as usual, then its ``jvp`` with one tangent per input."""
    if "jvp" not in _overridden(cls):
        raise NotImplementedError(ERR_NO_JVP)
    ctx = cls._backward_cls()
    output = _apply_general(cls, ctx, args, state)
    tangents_in = []
    for a in args:
        if isinstance(a, Tensor):
            tangents_in.append(a._fw_grad if a._fw_grad is not None else _zeros_like(a))
        else:
            tangents_in.append(None)
    ctx._in_jvp = True
    try:
        result = cls.jvp(ctx, *tangents_in)
    finally:
        ctx._in_jvp = False
    outputs = _outputs(output)
    result = list(result) if type(result) is tuple else [result]
    if len(result) != len(outputs):
        raise RuntimeError(
            "Function's jvp returned an invalid number of forward gradients (expected "
            f"{len(outputs)} but got {len(result)})"
        )
    non_diff = ctx.non_differentiable
    for i, (o, t) in enumerate(zip(outputs, result)):
        if t is None:
            continue
        if not isinstance(t, Tensor):
            raise RuntimeError(f"expected Variable or None (got {type(t).__name__}) for grad output {i}.")
        if not _is_float(o) or any(o is nd for nd in non_diff):
            raise RuntimeError(
                f"Function's jvp returned a gradient at position {i}, but  the corresponding forward output is not a "
                "differentiable Tensor.You should return None at that position instead."
            )
        _check_tangent_shape(o, t)
        if t._base is None and any(isinstance(a, Tensor) and a is not o and a._data is o._data for a in args):
            raise RuntimeError(
                "A custom Function's forward is returning a view (or an input as-is) but the jvp is not returning a "
                "view."
            )
        if any(o is a for a in args):  # an input modified in place (mark_dirty): its tangent is updated
            inplace_tangent(o, _with_tangent(t))
        else:
            o.__dict__.pop("_fw_grad", None)
            _set_tangent(o, t)
    return output


def _with_tangent(t: Tensor) -> Tensor:
    holder = Tensor._make(t._data)
    holder._fw_grad = t
    return holder
