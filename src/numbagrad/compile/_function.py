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

A backward that computes again what the forward computed from the same saved tensors (a swish's backward calls
``sigmoid(x)`` again) gets it from the forward instead: after the first backward is traced, the forward is
planned again to return those values too (its fused kernel writes them out), ctx carries them, and the backward's
plan takes them as inputs (``share_recomputed``). Not with ``create_graph`` (they carry no graph), not for a
backward that reads ctx attributes, and never the forward's outputs (ctx holding them would keep them alive).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .._tensor import Tensor
from ..autograd.function import _overridden
from ..autograd.grad_mode import state
from ..scalar_math import Row
from ._api import CompiledFunction, _meta
from ._plan import Plan, _uses, values_in
from ._trace import OpStep, Recorder, Trace

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


# --- values the forward computed and the backward would compute again -------------------------------------------
@dataclass
class _Shared:
    """Forward values handed to the backward instead of recomputed (``sigmoid(x)`` in a swish whose backward
    computes ``sigmoid(x)`` again): the forward's plan returns them, ctx carries them with this record, and the
    backward's plan takes them as inputs. ``plans``: the backward plan per backward guard key."""

    plans: dict = field(default_factory=dict)


def _saved_values(forward: Trace) -> list | None:
    """The forward value each ``save_for_backward`` argument is (None for one that is not traced)."""
    effects = forward.out[1][1][1]
    saved = None
    for effect in effects:
        name, args = effect[1]
        if name == ("const", "save_for_backward"):
            saved = [a[1] if a[0] == "val" else None for a in args[1]]
    return saved


def _row_key(step, mapped: dict):
    """What a table-row step computes, in forward values: (class, args), or None."""
    if not isinstance(step, OpStep) or step.kwargs or step.out[0] != "val":
        return None
    if not isinstance(getattr(step.cls, "row", None), Row):
        return None
    key = [step.cls]
    for a in step.args[1]:
        if a[0] == "val" and a[1] in mapped:
            key.append(("v", mapped[a[1]]))
        elif a[0] == "const" and isinstance(a[1], (int, float)) and not isinstance(a[1], bool):
            key.append(("c", type(a[1]), a[1]))
        else:
            return None
    return tuple(key)


def share_recomputed(forward: Trace, backward: Trace, saved: tuple):
    """(the forward trace returning the shared values too, the backward trace taking them as inputs), or None:
    backward table-row steps that compute, from saved tensors, what a forward step computed from the same values
    (not the forward's outputs: ctx holding them would keep them alive)."""
    saved_values = _saved_values(forward)
    if saved_values is None or len(saved_values) != len(saved):
        return None
    mapped = {}  # backward value -> forward value
    position = 0
    for k, t in enumerate(saved):
        if t is not None:
            if saved_values[k] is not None:
                mapped[backward.inputs[position]] = saved_values[k]
            position += 1
    computed = {}
    itself = {v: v for v in range(len(forward.values))}  # forward steps are keyed in their own values
    for step in forward.steps:
        key = _row_key(step, itself)
        if key is not None:
            computed.setdefault(key, step.out[1])
    outputs = values_in(forward.out[1][0], set())
    replaced = set()
    for i, step in enumerate(backward.steps):
        key = _row_key(step, mapped)
        value = computed.get(key) if key is not None else None
        if value is not None and value not in outputs:
            mapped[step.out[1]] = value
            replaced.add(i)
    if not replaced:
        return None
    uses = _uses(backward)
    needed = [
        backward.steps[i].out[1]
        for i in sorted(replaced)
        if any(u not in replaced for u in uses.get(backward.steps[i].out[1], ()))
    ]
    if not needed:
        return None
    extras = ("tuple", [("val", mapped[v]) for v in needed])
    new_forward = replace(forward, out=("tuple", [*forward.out[1], extras]))
    steps = [s for i, s in enumerate(backward.steps) if i not in replaced]
    new_backward = replace(backward, inputs=[*backward.inputs, *needed], steps=steps)
    return new_forward, new_backward


class _CompiledCtxMethod(CompiledFunction):
    """A compiled ``forward(ctx, *args)`` or ``backward(ctx, *grads)``: guard keys and plans as for functions,
    with the ctx handled as described in the module docstring."""

    def __init__(self, fn, kind: str, fullgraph: bool, dynamic: bool, owner_roots) -> None:
        super().__init__(
            fn, fullgraph=fullgraph, dynamic=dynamic, roots=[fn, *owner_roots], function_class=compiled_twin
        )
        self.kind = kind
        self.forward = None  # (backward) the compiled forward, whose values it may share
        self._traces: dict = {}  # (forward) guard key -> its trace, to plan again with shared values
        self._shared: dict = {}  # (forward) guard key -> its _Shared

    def reset(self) -> None:
        super().reset()
        self._traces.clear()
        self._shared.clear()

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
        result = plan.replay(*leaves)
        _apply_effects(ctx, result[1])
        if len(result) == 3:  # values the backward would compute again (see _Shared)
            ctx._compiled_shared = (self._shared[key], result[2])
        else:
            ctx._compiled_key = key
        return result[0]

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
            self._plans[key] = Plan(trace, self.function_class)
            self._traces[key] = trace
            ctx._compiled_key = key
        return out

    def share(self, key, backward_key, backward: Trace, saved: tuple) -> None:
        """Plan the forward of ``key`` again to hand the backward what it would recompute (if anything)."""
        trace = self._traces.get(key)
        if trace is None or key in self._shared:
            return
        found = share_recomputed(trace, backward, saved)
        if found is None:
            return
        new_forward, new_backward = found
        shared = _Shared()
        shared.plans[backward_key] = Plan(new_backward, self.function_class)
        self._plans[key] = Plan(new_forward, self.function_class)
        self._shared[key] = shared

    # backward
    def _backward(self, ctx, grads):
        saved = ctx.saved_tensors
        tensors = []
        parts = [state.enabled, ctx.needs_input_grad]  # then each saved tensor's and gradient's meta (or None)
        dynamic = self.dynamic
        for group in (saved, grads):
            for t in group:
                if t is None:
                    parts.append(None)
                else:
                    tensors.append(t)
                    parts.append(_meta(t, dynamic))
            parts.append(len(group))
        key = tuple(parts)
        shared = ctx.__dict__.get("_compiled_shared")
        if shared is not None:
            plan = shared[0].plans.get(key)
            if plan is not None:
                return plan.replay(*tensors, *shared[1])
        entry = self._plans.get(key)
        if entry is not None:
            names, plans = entry
            plan = plans.get(tuple(_hashable(getattr(ctx, n)) for n in names))
            if plan is _EAGER:
                return self.fn(ctx, *grads)
            if plan is not None:
                return plan.replay(*tensors)
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
            entry[1][values] = Plan(trace, self.function_class)
            forward_key = ctx.__dict__.get("_compiled_key")
            if forward_key is not None and not names and not key[0] and self.forward is not None:
                # no ctx attributes read, no create_graph (shared values carry no graph): share what it can
                self.forward.share(forward_key, key, trace, saved)
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
    compiled_forward = None
    if cls._new_style:
        attrs["forward"] = staticmethod(
            CompiledFunction(forward, fullgraph=fullgraph, dynamic=dynamic, roots=roots, function_class=compiled_twin)
        )
    else:
        compiled_forward = _CompiledCtxMethod(forward, "forward", fullgraph, dynamic, roots)
        attrs["forward"] = staticmethod(compiled_forward)
    names = _overridden(cls)
    backward_name = "vjp" if "vjp" in names and cls.vjp is not cls.backward else "backward"
    backward = cls._backward_fn()
    compiled_backward = _CompiledCtxMethod(backward, "backward", fullgraph, dynamic, roots)
    compiled_backward.forward = compiled_forward
    attrs[backward_name] = staticmethod(compiled_backward)
    compiled = type(cls)(cls.__name__, (cls,), attrs)
    compiled._compiled_from = cls
    return compiled


def compiled_twin(cls: type) -> type:
    """What a plan replays for a custom Function that the traced code called: its compiled twin (made on first
    need, kept on the class), so that its forward and its own backward run fused kernels too, as under
    ``@numbagrad.compile`` (torch.compile traces into autograd.Functions too). A forward that cannot be traced
    runs eagerly inside the twin, with the same results. numbagrad's own ops and compiled classes replay as they
    are, and so does a class the twin cannot be made for."""
    if cls.__module__.startswith("numbagrad.") or "_compiled_from" in cls.__dict__:
        return cls
    twin = cls.__dict__.get("_compiled_twin")
    if twin is None:
        try:
            twin = compile_function_class(cls)
        except Exception:  # (a class the subclassing cannot handle: its eager apply still gives the result)
            twin = cls
        try:
            cls._compiled_twin = twin
        except (AttributeError, TypeError):  # (a metaclass that refuses attributes: made again per plan)
            pass
    return twin
