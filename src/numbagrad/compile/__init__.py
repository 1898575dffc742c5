"""``numbagrad.compile``: trace a function, an ``nn.Module`` or a custom ``Function`` and fuse its elementwise work.

    f = numbagrad.compile(lambda x, w, b: (x * w + b).relu().sum())
    loss = f(x, w, b)        # first call per guard key: runs eagerly and records the ops
    loss = f(x, w, b)        # later calls: replay, each fusion group one kernel forward and one backward
    loss.backward()

The first call for a guard key (input shapes and strides, or ranks when ``dynamic=True``, dtypes, devices,
``requires_grad``, grad mode, the default dtype, a module's ``training``, non-tensor arguments) runs the function
on tracer tensors: the result is the eager result, and the recorded ops become a plan (``_plan``). Runs of table
rows with an optional closing ``sum``/``mean``/``amax`` become fusion groups, each one generated kernel forward and
one backward and one node in the eager graph (``_group``); other ops replay with their own ``apply``. What cannot
be traced (``.item()``, ``print``, data-dependent control flow, in-place updates, tensors made by untraced code)
breaks the graph: that key runs eagerly, or with ``fullgraph=True`` raises ``GraphBreakError`` naming the line.

Not guarded (as documented limits): Python values read from globals or module attributes other than tensors
(they are baked into the plan), and a parameter *replaced* by a new tensor object (in-place updates are seen).

This module is callable: ``numbagrad.compile(fn)`` is ``numbagrad.compile.compile(fn)``. Importing it does not
import Numba; kernels compile (or load from Numba's disk cache) on their first launch.
"""

from __future__ import annotations

import functools
import sys
import types

from .._tensor import Tensor
from .._types import get_default_dtype as _default_dtype
from ..autograd.grad_mode import state
from ._trace import GraphBreakError, Recorder

__all__ = ["CompiledFunction", "CompiledModule", "GraphBreakError", "compile"]

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


class CompiledFunction:
    """A compiled callable: a plan per guard key, replayed without Python tracing."""

    def __init__(self, fn, *, fullgraph: bool = False, dynamic: bool = False, roots=None, guard=None) -> None:
        self.fn = fn
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.roots = [fn] if roots is None else roots
        self._guard = guard  # extra guard value (a module's training flag), or None
        self._plans: dict = {}
        self._exact: dict = {}  # dynamic mode: plans specialized to exact shapes
        self.graph_breaks: list = []  # (reason, location) of each key that broke
        functools.update_wrapper(self, fn, updated=())

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self, obj)

    @property
    def plans(self) -> list:
        """The plans traced so far (for inspection: ``plan.groups``, ``plan.source``)."""
        return [p for p in list(self._plans.values()) + list(self._exact.values()) if hasattr(p, "groups")]

    def _key(self, args, kwargs, dynamic: bool):
        parts = [state.enabled, _default_dtype()]
        if self._guard is not None:
            parts.append(self._guard())
        if not kwargs and not dynamic:  # the common case, kept lean: one tuple per tensor
            for a in args:
                if not isinstance(a, Tensor):
                    break
                d = a._data
                parts.append((d.shape, d.strides, d.dtype, a._requires_grad or a.grad_fn is not None, type(d)))
            else:
                if len(args) > 1 and len({id(a) for a in args}) < len(args):  # the same tensor twice
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
        key, leaves = self._key(args, kwargs, self.dynamic)
        plan = self._plans.get(key)
        if plan is _SPECIALIZED:
            key, leaves = self._key(args, kwargs, False)
            plan = self._exact.get(key)
        if plan is None:
            return self._trace(key, args, kwargs, leaves)
        if plan is _EAGER:
            return self.fn(*args, **kwargs)
        return plan(*leaves)

    def _trace(self, key, args, kwargs, leaves):
        from ._plan import Plan

        rec = Recorder(self.roots, self.fullgraph)
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
            plan = Plan(trace)
        except Exception as err:  # a planner bug must not cost the user a result: this key runs eagerly
            if self.fullgraph:
                raise
            import warnings

            name = getattr(self.fn, "__qualname__", self.fn)
            warnings.warn(
                f"numbagrad.compile could not plan {name!r} ({type(err).__name__}: {err}); it runs eagerly. "
                "Please report this.",
                RuntimeWarning,
                stacklevel=3,
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


class CompiledModule:
    """A module whose forward is compiled. Everything else (parameters, ``state_dict``, ``train()``, hooks,
    attributes) is the original module's, reached through this wrapper."""

    def __init__(self, module, *, fullgraph: bool = False, dynamic: bool = False) -> None:
        object.__setattr__(self, "_orig_mod", module)
        compiled = CompiledFunction(
            module.forward,
            fullgraph=fullgraph,
            dynamic=dynamic,
            roots=[module, module.forward],
            guard=lambda: module.training,
        )
        object.__setattr__(self, "forward", compiled)

    def __call__(self, *args, **kwargs):
        module = self._orig_mod
        for hook in module._forward_pre_hooks.values():
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook in module._forward_hooks.values():
            result = hook(module, args, output)
            if result is not None:
                output = result
        return output

    def __getattr__(self, name: str):
        return getattr(self._orig_mod, name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._orig_mod, name)

    def __dir__(self) -> list:
        return sorted(set(dir(self._orig_mod)) | {"_orig_mod", "forward"})

    def __repr__(self) -> str:
        return f"CompiledModule({self._orig_mod!r})"

    def _self_returning(name: str):  # noqa: N805 - builds methods
        def method(self, *args, **kwargs):
            getattr(self._orig_mod, name)(*args, **kwargs)
            return self

        method.__name__ = name
        return method

    train = _self_returning("train")
    eval = _self_returning("eval")
    to = _self_returning("to")
    cuda = _self_returning("cuda")
    cpu = _self_returning("cpu")
    float = _self_returning("float")
    double = _self_returning("double")
    requires_grad_ = _self_returning("requires_grad_")
    del _self_returning


def _compile_function_class(cls, fullgraph: bool, dynamic: bool):
    from ._function import compile_function_class

    return compile_function_class(cls, fullgraph=fullgraph, dynamic=dynamic)


def compile(fn_or_module=None, *, fullgraph: bool = False, dynamic: bool = False, **options):  # noqa: A001
    """Compile a function, an ``nn.Module`` or a custom ``Function`` class (also as a decorator, with or without
    arguments). ``torch.compile``'s other options (``backend``, ``mode``, ...) are accepted and ignored."""
    if fn_or_module is None:
        return lambda f: compile(f, fullgraph=fullgraph, dynamic=dynamic, **options)
    from ..autograd.function import Function

    if isinstance(fn_or_module, type) and issubclass(fn_or_module, Function):
        return _compile_function_class(fn_or_module, fullgraph, dynamic)
    module_cls = _module_class()
    if module_cls is not None and isinstance(fn_or_module, module_cls):
        return CompiledModule(fn_or_module, fullgraph=fullgraph, dynamic=dynamic)
    if not callable(fn_or_module):
        raise TypeError(f"numbagrad.compile expects a callable, a Module or a Function class, got {fn_or_module!r}")
    return CompiledFunction(fn_or_module, fullgraph=fullgraph, dynamic=dynamic)


def _module_class():
    nn = sys.modules.get("numbagrad.nn")  # a Module exists only if numbagrad.nn was imported
    return nn.Module if nn is not None else None


class _CallableModule(types.ModuleType):
    """``numbagrad.compile`` is this package and the function at once (``numbagrad.compile(fn)`` works)."""

    def __call__(self, *args, **kwargs):
        return compile(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
