"""The compiled callables: guard keys, the plan cache, tracing on first use, replay after (see the package)."""

from __future__ import annotations

import functools
import types
import weakref

from .._tensor import Tensor
from .._types import _default_float  # get_default_dtype() is _default_float[0]
from ..autograd.grad_mode import state
from ..nn.module import Module, module_generation, module_state, same_state
from ._plan import Plan
from ._trace import Recorder, values_changed

#: How many calls in a row a compiled function traces again because what its plans read changed (a module, a global
#: value) before it runs eagerly for good, as torch's ``recompile_limit``: tracing at every call costs more than
#: eager mode. A replay in between starts the count over.
RETRACE_LIMIT = 8

_EAGER = object()  # plan-cache entry of a key whose trace broke: it runs eagerly
_SPECIALIZED = object()  # dynamic-cache entry whose trace read shapes in Python: look up the exact shapes


def _flatten(obj, leaves: list, spec: list) -> None:
    """Tensors of (nested tuples, lists, dicts of) arguments into ``leaves``; everything else into ``spec``."""
    if isinstance(obj, Tensor):
        leaves.append(obj)
        spec.append(Tensor)
    elif type(obj) in (tuple, list):
        spec.append((type(obj), len(obj)))
        for o in obj:
            _flatten(o, leaves, spec)
    elif type(obj) is dict:
        spec.append((dict, tuple(obj)))
        for o in obj.values():
            _flatten(o, leaves, spec)
    else:
        try:
            hash(obj)
            spec.append((type(obj), obj))
        except TypeError:
            spec.append((type(obj), id(obj)))  # unhashable: the same object


def _meta(t: Tensor, dynamic: bool) -> tuple:
    """A tensor's part of the guard key. Strides stand for the memory layout (ops chose views or copies by it);
    with ``dynamic`` only the rank, which dims have size 1 (broadcasting) and contiguity count."""
    d = t._data
    if dynamic:
        shape = d.shape
        layout = (len(shape), tuple(s == 1 for s in shape), d.flags.c_contiguous)
        return (layout, d.dtype, t._requires_grad or t.grad_fn is not None, type(d))
    return (d.shape, d.strides, d.dtype, t._requires_grad or t.grad_fn is not None, type(d))


_LIVE: weakref.WeakSet = weakref.WeakSet()  # every compiled callable still in use (``numbagrad.compiler.reset``)


def reset_all() -> None:
    """Forget the plans of every compiled function, module and custom Function (``numbagrad.compiler.reset``)."""
    for compiled in list(_LIVE):
        compiled.reset()


class CompiledFunction:
    """A compiled callable: a plan per guard key, replayed without Python tracing."""

    def __init__(
        self, fn, *, fullgraph: bool = False, dynamic: bool = False, roots=None, guard=None, function_class=None
    ) -> None:
        self.fn = fn
        self.function_class = function_class  # see ``Plan``: how the custom Functions it calls replay
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.roots = [fn] if roots is None else roots
        self._guard = guard  # extra guard value (a module's training flag), or None
        self._plans: dict = {}
        self._exact: dict = {}  # dynamic mode: plans specialized to exact shapes
        self.graph_breaks: list = []  # (reason, location) of each key that broke
        # the module changes counted when the last call returned: after a change to one of the modules the traces
        # reached (a parameter, buffer, child, hook or Python attribute assigned another object), what the plans
        # read as constants may be stale, so they are traced again; a change elsewhere leaves them
        self._generation = module_generation()
        self._watched: dict = {}  # id -> (module, its module_state) for each module the traces reached
        # (holder id, name) -> (holder, name, value): the global and closure values the traces may have read
        self._reads: dict = {}
        self._retraces = 0  # calls in a row that started the traces over (``RETRACE_LIMIT``)
        self._eager = False  # past the limit: every call runs eagerly
        functools.update_wrapper(self, fn, updated=())
        _LIVE.add(self)

    def reset(self) -> None:
        """Forget every plan and how often they were traced again: the next call for each guard key traces."""
        self._forget_all()
        self._retraces = 0
        self._eager = False

    def _start_over(self, reason: str) -> None:
        """Forget every plan since ``reason``; past ``RETRACE_LIMIT`` such times, run eagerly from now on."""
        self._forget_all()
        self._retraces += 1
        if self._retraces > RETRACE_LIMIT:
            self._eager = True
            self._warn(
                "traced",
                f"again at {RETRACE_LIMIT} calls in a row (the last time: {reason}); it runs eagerly from now on "
                "(numbagrad.compiler.reset() starts over).",
                UserWarning,
            )

    def _warn(self, verb: str, rest: str, category: type) -> None:
        """Warn ``numbagrad.compile <verb> '<the function's name>' <rest>`` at the user's call (``__call__``'s
        caller, two frames above the method that calls this)."""
        import warnings

        name = getattr(self.fn, "__qualname__", self.fn)
        warnings.warn(f"numbagrad.compile {verb} {name!r} {rest}", category, stacklevel=4)

    def _forget_all(self) -> None:
        self._plans.clear()
        self._exact.clear()
        self.graph_breaks.clear()
        self._watched = {}
        self._reads = {}

    def _forget_plans(self) -> None:
        """Forget the plans, keeping which keys run eagerly (their breaks are the code's, not the modules')."""
        for plans in (self._plans, self._exact):
            for key in [k for k, plan in plans.items() if plan is not _EAGER and plan is not _SPECIALIZED]:
                del plans[key]

    def _modules_changed(self) -> bool:
        """Whether a module the traces reached is not as they found it (``module_state``)."""
        watched = self._watched.values()
        return any(seen is None or not same_state(module_state(module), seen) for module, seen in watched)

    def _watch(self) -> None:
        """Take the watched modules' states as they are now (after a trace or an eager call changed them)."""
        self._watched = {key: (module, module_state(module)) for key, (module, _) in self._watched.items()}
        self._generation = module_generation()

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self, obj)

    @property
    def plans(self) -> list:
        """The plans traced so far (for inspection: ``plan.groups``, ``plan.source``)."""
        return [p for p in list(self._plans.values()) + list(self._exact.values()) if hasattr(p, "groups")]

    def _key(self, args, kwargs, dynamic: bool):
        parts = [state.enabled, _default_float[0], state.autocast]
        if self._guard is not None:
            parts.append(self._guard())
        if not kwargs and not dynamic:  # the common case, kept lean: one tuple per tensor
            for a in args:
                if type(a) is not Tensor and not isinstance(a, Tensor):
                    break
                d = a._data
                parts.append((d.shape, d.strides, d.dtype, a._requires_grad or a.grad_fn is not None, type(d)))
            else:
                if len(args) > 1 and len(set(map(id, args))) < len(args):  # the same tensor twice
                    parts.append(tuple(next(i for i, b in enumerate(args) if b is a) for a in args))
                return tuple(parts), args
        leaves, spec = [], []
        _flatten(args, leaves, spec)
        _flatten(kwargs, leaves, spec)
        parts += [_meta(t, dynamic) for t in leaves]
        parts.append(tuple(spec))
        if len({id(t) for t in leaves}) < len(leaves):
            parts.append(tuple(next(i for i, b in enumerate(leaves) if b is a) for a in leaves))
        return tuple(parts), leaves

    def __call__(self, *args, **kwargs):
        if state.tracer is not None:  # inside another trace: inline (its ops are recorded there)
            return self.fn(*args, **kwargs)
        if module_generation() != self._generation:
            if self._modules_changed():
                self._start_over("a module it reads changed")
            self._generation = module_generation()
        if self._reads and values_changed(self._reads.values()):
            self._start_over("a global or closure value it reads changed")
        if self._eager:
            return self.fn(*args, **kwargs)
        key, leaves = self._key(args, kwargs, self.dynamic)
        plan = self._plans.get(key)
        if plan is _SPECIALIZED:
            key, leaves = self._key(args, kwargs, False)
            plan = self._exact.get(key)
        if plan is None:
            out = self._trace(key, args, kwargs, leaves)
        elif plan is _EAGER:
            out = self.fn(*args, **kwargs)
        else:
            self._retraces = 0
            return plan.replay(*leaves)
        if module_generation() != self._generation and self._modules_changed():
            self._forget_plans()  # (this eager call changed a module the other keys' plans read)
        self._watch()
        return out

    def _trace(self, key, args, kwargs, leaves):
        rec = Recorder(self.roots, self.fullgraph)
        self._watched.update((id(m), (m, None)) for m in rec.modules)
        self._reads.update(((id(holder), name), (holder, name, value)) for holder, name, value in rec.reads)
        inputs = [rec.input(t) for t in leaves]
        state.tracer = rec
        try:
            out = self.fn(*args, **kwargs)
            state.tracer = None
            trace = rec.finish(inputs, out)
        finally:
            state.tracer = None
            rec.restore()
        if trace is None:
            self._store(key, _EAGER, rec, args, kwargs)
            self.graph_breaks.append(rec.broken)
            return out
        try:
            plan = Plan(trace, self.function_class)
        except Exception as err:  # a planner bug must not cost the user a result: this key runs eagerly
            if self.fullgraph:
                raise
            self._warn(
                "could not plan", f"({type(err).__name__}: {err}); it runs eagerly. Please report this.", RuntimeWarning
            )
            plan = _EAGER
        self._store(key, plan, rec, args, kwargs)
        return out

    def _store(self, key, plan, rec, args, kwargs) -> None:
        if self.dynamic and rec.shape_reads:
            self._plans[key] = _SPECIALIZED
            exact, _ = self._key(args, kwargs, False)
            self._exact[exact] = plan
        else:
            self._plans[key] = plan


class OptimizedModule(Module):
    """What ``numbagrad.compile(module)`` returns, laid out as torch's ``OptimizedModule``: a Module whose one child,
    ``_orig_mod``, is the original module, and whose forward runs the original's hooks around its compiled forward.

    Parameters, buffers and ``training`` are the original's: ``parameters()`` yields the same tensors, ``train()``
    and ``eval()`` reach it, and ``state_dict`` keys carry the ``_orig_mod.`` prefix, as torch's do
    (``compiled._orig_mod.state_dict()`` has the original's keys). Any other attribute reads and writes through to
    the original. Copies and pickles hold the original and compile its forward again."""

    _OWN = frozenset({"_orig_mod", "_compiled", "_options"})  # set here, not on the original (as class attributes are)

    def __init__(self, module: Module, *, fullgraph: bool = False, dynamic: bool = False, function_class=None) -> None:
        object.__setattr__(self, "_orig_mod", module)  # first: attribute access reads through to it
        super().__init__()
        del self.__dict__["training"]  # the property below mirrors the original's
        self._modules["_orig_mod"] = module
        object.__setattr__(self, "_options", (fullgraph, dynamic, function_class))
        self._compile()

    def _compile(self) -> None:
        module = self._orig_mod
        fullgraph, dynamic, function_class = self._options
        compiled = CompiledFunction(
            module.forward,
            fullgraph=fullgraph,
            dynamic=dynamic,
            roots=[module, module.forward],
            guard=lambda: module.training,
            function_class=function_class,
        )
        object.__setattr__(self, "_compiled", compiled)

    def forward(self, *args, **kwargs):
        """The original's forward pre-hooks, its compiled forward, then its forward hooks (outside the compiled
        code, so they run on every call)."""
        return self._orig_mod._call_with_hooks(self._compiled, args, kwargs)

    @property
    def training(self) -> bool:  # type: ignore[override]
        """The original module's mode (``train()``/``eval()`` on either set it)."""
        return self._orig_mod.training

    @training.setter
    def training(self, value: bool) -> None:
        self._orig_mod.training = value

    @property
    def graph_breaks(self) -> list:
        """(reason, location) of each guard key whose trace broke (see ``CompiledFunction``)."""
        return self._compiled.graph_breaks

    def __getattr__(self, name: str):
        if name == "_orig_mod":  # (only while unpickling, before __setstate__ restores it)
            raise AttributeError(name)
        return getattr(self._orig_mod, name)

    def __setattr__(self, name: str, value) -> None:
        if name in self._OWN or hasattr(type(self), name):
            super().__setattr__(name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        if name in self._OWN or hasattr(type(self), name):
            super().__delattr__(name)
        else:
            delattr(self._orig_mod, name)

    def __len__(self) -> int:
        return len(self._orig_mod)

    def __dir__(self) -> list:
        return sorted(set(dir(self._orig_mod)) | set(super().__dir__()))

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_compiled", None)  # plans and kernels are this process's: compiled again after loading
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._compile()


CompiledModule = OptimizedModule  # the name this class had before it took torch's
