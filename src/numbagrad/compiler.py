"""``numbagrad.compiler``: torch.compiler's helpers for code that runs both compiled and eagerly.

* ``compile``: ``numbagrad.compile``.
* ``disable(fn)``: ``fn`` is never traced. Compiled code that calls it breaks its graph there, so that guard key runs
  eagerly, with the same results (``fullgraph=True`` makes it an error naming the call); called eagerly it is ``fn``.
* ``is_compiling()`` (and ``is_dynamo_compiling()``): True while a compiled function is being traced. The trace is
  what later calls replay, so a branch on it is taken as in torch: the compiled path gets the ``True`` branch.
* ``reset()``: every compiled function, module and custom Function forgets its plans and traces again on its next
  call (the kernels stay in the disk cache).
* ``allow_in_graph(fn)``: ``fn`` itself. numbagrad traces through any Python function, so there is nothing to allow.
* ``cudagraph_mark_step_begin()``: nothing to mark; numbagrad records no CUDA graphs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from .autograd.grad_mode import break_trace, state
from .compile import compile  # noqa: A004 - torch.compiler.compile is torch.compile
from .compile._api import reset_all

__all__ = [
    "allow_in_graph",
    "compile",
    "cudagraph_mark_step_begin",
    "disable",
    "is_compiling",
    "is_dynamo_compiling",
    "reset",
]


def disable(fn: Callable | None = None, recursive: bool = True, *, reason: str | None = None):
    """``fn`` run eagerly even when compiled code calls it (also as a decorator, with or without arguments).
    ``recursive`` is accepted for torch's signature: what ``fn`` calls runs eagerly either way."""
    if fn is None:
        return lambda f: disable(f, recursive, reason=reason)
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    why = f"calls {name}, marked numbagrad.compiler.disable" + (f" ({reason})" if reason else "")

    @functools.wraps(fn)
    def eager(*args, **kwargs):
        break_trace(why)
        return fn(*args, **kwargs)

    return eager


def is_compiling() -> bool:
    """True while a compiled function is being traced (the code that later calls replay)."""
    return state.tracer is not None


is_dynamo_compiling = is_compiling


def reset() -> None:
    """Forget every compiled plan: each compiled callable traces again on its next call."""
    reset_all()


def allow_in_graph(fn: Callable) -> Callable:
    """``fn`` itself: numbagrad's tracer already follows any Python function into the graph."""
    return fn


def cudagraph_mark_step_begin() -> None:
    """Nothing to do: numbagrad records no CUDA graphs."""
