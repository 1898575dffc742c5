"""``@numbagrad.compile`` on a custom ``Function`` class: its forward and its own backward, each compiled.

The compiled class is a subclass with the same name (so its node prints as ``<Name>Backward``) whose ``forward``
and ``backward`` replay traced plans. The gradient is the user's backward, not the autograd of the forward:
straight-through estimators, surrogate and clipped gradients keep their meaning.

``forward(ctx, *args)`` is traced with a stand-in ``ctx`` that records what the forward does to it
(``save_for_backward``, ``mark_dirty``, ``mark_non_differentiable``, ``set_materialize_grads``, attributes it
sets); the plan returns those effects and the replay applies them to the real ctx. ``backward(ctx, *grads)`` is
traced on the saved tensors and the incoming gradients; the non-tensor ctx attributes it reads are part of its
guard. ``needs_input_grad`` is part of both guards. A new-style forward (``setup_context``) is compiled as a plain
function; ``setup_context`` runs as written.
"""

from __future__ import annotations

from .._tensor import Tensor
from ..autograd.function import _overridden
from ..autograd.grad_mode import state
from ._api import CompiledFunction, _meta
from ._plan import Plan
from ._trace import Recorder

_EAGER = object()


class _ForwardCtx:
    """The ctx a traced forward sees: records its effects, and applies them to the real ctx."""

    def __init__(self, real, effects: list) -> None:
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "_effects", effects)

    def save_for_backward(self, *tensors) -> None:
        self._effects.append(("save_for_backward", tensors))
        self._real.save_for_backward(*tensors)

    def mark_dirty(self, *tensors) -> None:
        self._effects.append(("mark_dirty", tensors))
        self._real.mark_dirty(*tensors)

    def mark_non_differentiable(self, *tensors) -> None:
        self._effects.append(("mark_non_differentiable", tensors))
        self._real.mark_non_differentiable(*tensors)

    def set_materialize_grads(self, value: bool) -> None:
        self._effects.append(("set_materialize_grads", (value,)))
        self._real.set_materialize_grads(value)

    def save_for_forward(self, *tensors) -> None:
        self._effects.append(("save_for_forward", tensors))
        self._real.save_for_forward(*tensors)

    def __setattr__(self, name: str, value) -> None:
        self._effects.append(("setattr", (name, value)))
        setattr(self._real, name, value)

    def __getattr__(self, name: str):
        return getattr(self._real, name)


def _apply_effects(ctx, effects) -> None:
    for name, args in effects:
        if name == "setattr":
            setattr(ctx, *args)
        else:
            getattr(ctx, name)(*args)


class _BackwardCtx:
    """The ctx a traced backward sees: the traced saved tensors, and a record of the attributes it reads."""

    def __init__(self, real, saved: tuple, reads: dict) -> None:
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "_saved", saved)
        object.__setattr__(self, "_reads", reads)

    @property
    def saved_tensors(self) -> tuple:
        return self._saved

    saved_variables = saved_tensors

    def __getattr__(self, name: str):
        value = getattr(self._real, name)
        if not callable(value) or isinstance(value, Tensor):
            self._reads[name] = value
        return value

    def __setattr__(self, name: str, value) -> None:
        setattr(self._real, name, value)


def _hashable(value):
    try:
        hash(value)
        return (type(value), value)
    except TypeError:
        return (type(value), id(value))


class _CompiledCtxMethod(CompiledFunction):
    """A compiled ``forward(ctx, *args)`` or ``backward(ctx, *grads)``: guard keys and plans as for functions,
    with the ctx handled as described in the module docstring."""

    def __init__(self, fn, kind: str, fullgraph: bool, dynamic: bool, owner_roots) -> None:
        super().__init__(fn, fullgraph=fullgraph, dynamic=dynamic, roots=[fn, *owner_roots])
        self.kind = kind

    def __call__(self, ctx, *args):
        if state.tracer is not None:
            return self.fn(ctx, *args)
        if self.kind == "forward":
            return self._forward(ctx, args)
        return self._backward(ctx, args)

    # forward
    def _forward(self, ctx, args):
        key, leaves = self._key(args, {}, self.dynamic)
        key = (key, ctx.needs_input_grad)
        plan = self._plans.get(key)
        if plan is _EAGER:
            return self.fn(ctx, *args)
        if plan is None:
            return self._trace_forward(key, ctx, args, leaves)
        out, effects = plan(*leaves)
        _apply_effects(ctx, effects)
        return out

    def _trace_forward(self, key, ctx, args, leaves):
        effects: list = []
        proxy = _ForwardCtx(ctx, effects)

        def run(*a):
            return self.fn(proxy, *a)

        rec = Recorder(self.roots, self.fullgraph)
        inputs = [rec.input(t) for t in leaves]
        state.tracer = rec
        try:
            out = run(*args)
            state.tracer = None
            trace = rec.finish(inputs, (out, tuple((name, tuple(a)) for name, a in effects)))
        finally:
            state.tracer = None
            rec.restore()
        if trace is None:
            self._plans[key] = _EAGER
            self.graph_breaks.append(rec.broken)
        else:
            self._plans[key] = Plan(trace)
        return out

    # backward
    def _backward(self, ctx, grads):
        saved = ctx.saved_tensors
        tensors = [t for t in saved if t is not None] + [g for g in grads if g is not None]
        parts = [state.enabled, ctx.needs_input_grad, tuple(t is None for t in saved), tuple(g is None for g in grads)]
        parts += [_meta(t, self.dynamic) for t in tensors]
        key = tuple(parts)
        entry = self._plans.get(key)
        if entry is not None:
            names, plans = entry
            plan = plans.get(tuple(_hashable(getattr(ctx, n)) for n in names))
            if plan is _EAGER:
                return self.fn(ctx, *grads)
            if plan is not None:
                return plan(*tensors)
        return self._trace_backward(key, ctx, saved, grads, tensors)

    def _trace_backward(self, key, ctx, saved, grads, tensors):
        reads: dict = {}
        rec = Recorder(self.roots, self.fullgraph)
        inputs = [rec.input(t) for t in tensors]
        proxy = _BackwardCtx(ctx, saved, reads)
        state.tracer = rec
        try:
            out = self.fn(proxy, *grads)
            state.tracer = None
            if any(isinstance(v, Tensor) for v in reads.values()):
                rec.graph_break("reads a tensor stored as a ctx attribute (save it with save_for_backward)")
            trace = rec.finish(inputs, out)
        finally:
            state.tracer = None
            rec.restore()
        names = tuple(sorted(reads))
        entry = self._plans.get(key)
        if entry is None or entry[0] != names:
            entry = self._plans[key] = (names, {})
        values = tuple(_hashable(reads[n]) for n in names)
        if trace is None:
            entry[1][values] = _EAGER
            self.graph_breaks.append(rec.broken)
        else:
            entry[1][values] = Plan(trace)
        return out

    @property
    def plans(self) -> list:
        found = []
        for p in self._plans.values():
            if isinstance(p, tuple):
                found += [q for q in p[1].values() if isinstance(q, Plan)]
            elif isinstance(p, Plan):
                found.append(p)
        return found


def compile_function_class(cls, *, fullgraph: bool = False, dynamic: bool = False) -> type:
    """A subclass of the custom Function ``cls`` whose forward and backward are compiled."""
    roots = [cls]
    attrs = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__}
    if "node_name" in cls.__dict__:
        attrs["node_name"] = cls.__dict__["node_name"]
    forward = cls.forward
    if cls._new_style:
        attrs["forward"] = staticmethod(CompiledFunction(forward, fullgraph=fullgraph, dynamic=dynamic, roots=roots))
    else:
        attrs["forward"] = staticmethod(_CompiledCtxMethod(forward, "forward", fullgraph, dynamic, roots))
    names = _overridden(cls)
    backward_name = "vjp" if "vjp" in names and cls.vjp is not cls.backward else "backward"
    backward = cls._backward_fn()
    attrs[backward_name] = staticmethod(_CompiledCtxMethod(backward, "backward", fullgraph, dynamic, roots))
    compiled = type(cls)(cls.__name__, (cls,), attrs)
    compiled._compiled_from = cls
    return compiled
