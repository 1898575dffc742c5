"""``numbagrad.compile``: trace a function, an ``nn.Module`` or a custom ``Function`` and fuse its elementwise work.

    f = numbagrad.compile(lambda x, w, b: (x * w + b).relu().sum())
    loss = f(x, w, b)        # first call per guard key: runs eagerly and records the ops
    loss = f(x, w, b)        # later calls: replay, each fusion group one kernel forward and one backward
    loss.backward()

The first call for a guard key (input shapes and strides, or ranks when ``dynamic=True``, dtypes, devices,
``requires_grad``, grad mode, autocast, the default dtype, a module's ``training``, non-tensor arguments) runs the
function
on tracer tensors: the result is the eager result, and the recorded ops become a plan (``_plan``). Runs of table
rows with an optional closing ``sum``/``mean``/``amax`` become fusion groups, each one generated kernel forward and
one backward and one node in the eager graph (``_group``); other ops replay with their own ``apply``, and a custom
``Function`` it calls is compiled as ``@numbagrad.compile`` would compile it (its own backward kept); creation
functions (``zeros``, ``arange``, ``randn``...) replay too, random draws fresh at each call. What cannot
be traced (``.item()``, ``print``, data-dependent control flow, in-place updates, tensors made from host data,
a submodule with forward hooks, a computed tensor kept in a module attribute or an outside list: Python side
effects a replay would not repeat) breaks the graph: that key runs eagerly, or with
``fullgraph=True`` raises ``GraphBreakError`` naming the line.

A compiled module is an ``OptimizedModule`` (torch's name and layout): an ``nn.Module`` whose child ``_orig_mod``
is the original module, its forward compiled; parameters and ``training`` are the original's, and ``state_dict``
keys carry the ``_orig_mod.`` prefix, as torch's do.

Integer inputs (embedding indices, class targets) are read and range-checked at every call. A change to a module
the trace reached (a parameter, buffer, child, hook or Python attribute assigned another object, registered or
removed) makes the compiled function trace again on its next call; a forward that makes such a change breaks its
trace, since a replay would not.
Numbers, strings and short tuples, lists and dicts of them, and settings objects made of them (an
``argparse.Namespace``, a dataclass of numbers), that the user's code reads from globals or closures (its functions'
and its modules' methods'), and dicts and settings objects held by modules, are compared at each call, and a change
traces again, as torch's guards do.
A function traced again at 8 calls in a row (a value or module that changes at every call: ``spectral_norm``'s
weight) runs eagerly from then on, with a warning, as torch's ``recompile_limit``.
Not guarded (a documented limit): other Python objects' contents (an object holding tensors or modules besides its
numbers) and the values library code reads: they are read once, at trace time; call ``numbagrad.compiler.reset()``
after changing them.

This module is callable: ``numbagrad.compile(fn)`` is ``numbagrad.compile.compile(fn)``. Importing it does not
import Numba; kernels compile (or load from Numba's disk cache) on their first launch.
"""

from __future__ import annotations

import sys
import types

from ..autograd.function import Function
from ..nn.module import Module
from ._api import CompiledFunction, CompiledModule, OptimizedModule
from ._function import compile_function_class, compiled_twin
from ._trace import GraphBreakError

__all__ = ["CompiledFunction", "CompiledModule", "GraphBreakError", "OptimizedModule", "compile"]


def compile(fn_or_module=None, *, fullgraph: bool = False, dynamic: bool = False, **options):  # noqa: A001
    """Compile a function, an ``nn.Module`` or a custom ``Function`` class (also as a decorator, with or without
    arguments). ``torch.compile``'s other options (``backend``, ``mode``, ...) are accepted and ignored."""
    if fn_or_module is None:
        return lambda f: compile(f, fullgraph=fullgraph, dynamic=dynamic, **options)
    if isinstance(fn_or_module, type) and issubclass(fn_or_module, Function):
        return compile_function_class(fn_or_module, fullgraph=fullgraph, dynamic=dynamic)
    if isinstance(fn_or_module, Module):
        return OptimizedModule(fn_or_module, fullgraph=fullgraph, dynamic=dynamic, function_class=compiled_twin)
    if not callable(fn_or_module):
        raise TypeError(f"numbagrad.compile expects a callable, a Module or a Function class, got {fn_or_module!r}")
    return CompiledFunction(fn_or_module, fullgraph=fullgraph, dynamic=dynamic, function_class=compiled_twin)


class _CallableModule(types.ModuleType):
    """``numbagrad.compile`` is this package and the function at once (``numbagrad.compile(fn)`` works)."""

    def __call__(self, *args, **kwargs):
        return compile(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
