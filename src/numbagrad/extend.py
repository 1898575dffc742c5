"""User-facing kernel tools: ``numbagrad.elementwise`` (a differentiable op from scalar functions),
``numbagrad.warmup`` and ``numbagrad.warmup_manifest`` (compile ahead of time).

An ``elementwise`` op is a row of the same kind as the built-in table (``scalar_math.ROWS``) and runs through the
same Function class factory and generated kernels, so the path users take is the path built-ins take.
"""

from __future__ import annotations

import dis
import hashlib
import itertools
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ._tensor import Tensor
from .backend import codegen
from .ops._common import as_operand
from .ops.elementwise import _tensor_math, function_for, make_function
from .scalar_math import ROWS, Row

_counter = itertools.count()


def _math_names(fn) -> set[str]:
    """The ``math.<name>`` attributes a function reads."""
    names, previous = set(), None
    for ins in dis.get_instructions(fn):
        if previous is not None and previous.opname == "LOAD_GLOBAL" and previous.argval == "math":
            if ins.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                names.add(ins.argval)
        previous = ins
    return names


class _CheckedTensorGrads:
    """Tensor versions of a user row's gradients (for ``create_graph``), or a clear error when a gradient
    uses a ``math`` function that has no differentiable tensor counterpart."""

    def __init__(self, row: Row, lazy) -> None:
        self.row, self.lazy = row, lazy

    def __getitem__(self, i: int):
        missing = _math_names(self.row.grads[i]) - set(vars(_tensor_math()))
        if missing:
            raise RuntimeError(
                f"double backward through elementwise op '{self.row.forward.__name__}' is not supported: its "
                f"gradient {i} uses math.{', math.'.join(sorted(missing))}, which has no differentiable tensor "
                "version (supported: arithmetic, comparisons, select, math.exp/log/sqrt/sin/cos/tan/tanh)"
            )
        return self.lazy[i]


def elementwise(forward: Callable | None = None, *, grads: Sequence[Callable], name: str | None = None):
    """Make a differentiable elementwise op from a scalar ``forward`` and one scalar gradient per input.

    Each gradient has the table's fused signature ``(g, out, x[, y, ...]) -> g * d out / d input``, where ``out``
    is ``forward``'s result (reuse it, as ``exp``'s gradient ``g * out`` does)::

        def swish(x):
            return x / (1 + math.exp(-x))

        def swish_grad(g, out, x):
            return g * (out + (1 - out) / (1 + math.exp(-x)))

        swish = numbagrad.elementwise(swish, grads=[swish_grad])   # or @numbagrad.elementwise(grads=[...])
        y = swish(x)                                                # broadcasting, float32 and float64

    Write the scalar functions with arithmetic, comparisons, ``math`` and ``scalar_math.select`` only, so the same
    source compiles for the CPU (``numba.njit`` loops, serial and ``prange``) and for CUDA. Integer inputs are
    promoted to the default float dtype. Module-level ``def``\\s are copied into generated files and served from
    Numba's disk cache in later processes; lambdas and closures work too but compile again in every process.

    Double backward (``create_graph=True``) is supported when the gradients use arithmetic, ``select`` and
    ``math.exp/log/sqrt/sin/cos/tan/tanh``: the gradient formula then runs on tensors. Other ``math`` functions
    raise a ``RuntimeError`` that says so.
    """
    if forward is None:
        return lambda fn: elementwise(fn, grads=grads, name=name)
    grads = tuple(grads)
    label = name or forward.__name__
    if not label.isidentifier():
        label = "elementwise"
    # A unique row name: the kernel caches are keyed by it, and two ops may share a function name.
    digest = hashlib.sha1(f"{forward.__module__}.{forward.__qualname__}.{next(_counter)}".encode()).hexdigest()[:8]
    row = Row(f"user_{re.sub(r'[^0-9a-zA-Z_]', '_', label)}_{digest}", forward, grads, None, float_only=True)
    if len(grads) != row.arity:
        raise TypeError(f"elementwise: {label} takes {row.arity} input(s) but {len(grads)} gradient(s) were given")
    class_name = label[:1].upper() + label[1:]
    cls = make_function(row, f"{class_name}Backward", class_name)
    cls._tensor_grads = _CheckedTensorGrads(row, cls._tensor_grads)

    def op(*inputs) -> Tensor:
        if len(inputs) != row.arity:
            raise TypeError(f"{label}() takes {row.arity} argument(s) but {len(inputs)} were given")
        return cls.apply(*[as_operand(v) for v in inputs])

    op.__name__ = op.__qualname__ = label
    op.__doc__ = forward.__doc__ or f"Elementwise ``{label}`` made with ``numbagrad.elementwise``."
    op.__wrapped__ = forward
    op.Function = cls
    op.row = row
    return op


def warmup(
    step: Callable | Iterable[str | Callable] | None = None,
    /,
    *args,
    manifest: str | os.PathLike | None = None,
    save: str | os.PathLike | None = None,
    dtypes: Sequence[str] = ("float32", "float64"),
    **kwargs,
):
    """Compile (or load from the disk cache) ahead of time the kernels a program will run, so its first real step
    compiles nothing.

    ``warmup(step, *args, save=path, **kwargs)`` runs ``step(*args, **kwargs)`` once and returns its result (it is
    a real call: an optimizer step updates the parameters); ``save`` then writes the manifest of every kernel
    signature this process has compiled or loaded (``warmup_manifest``). ``warmup(manifest=path)`` compiles exactly
    the kernels a saved manifest lists, in this process, and returns their number: record once (in a build step or
    a previous run), replay at service start-up. The record is made where kernels are compiled (never on a kernel
    call), so it costs nothing at run time. A manifest holds the generated kernel source, so it works with an empty
    cache directory; it is code to trust like the program itself. Kernels of lambdas and closures exist only in the
    process that made them and are not in it.

    The older form ``warmup(ops, dtypes=...)`` compiles the forward and gradient kernels (serial and ``prange``)
    of table rows (``"relu"``, ``"mul"``) or ``elementwise`` ops (``None``: every row) for tensor operands of the
    same shape; it is an approximation of what a step runs (reductions, scalar operands and optimizer kernels are
    not in it), so prefer a step or a manifest.
    """
    if manifest is not None:
        if step is not None or args or kwargs or save is not None:
            raise TypeError("warmup(manifest=...) takes no step, arguments or save=")
        with open(manifest, encoding="utf-8") as f:
            return codegen.replay(json.load(f))
    if callable(step):
        result = step(*args, **kwargs)
        if save is not None:
            warmup_manifest(save)
        return result
    if kwargs or save is not None or len(args) > 1:
        raise TypeError("warmup(ops, dtypes) takes a list of ops and dtypes only; pass a callable step to run one")
    _warmup_rows(step, args[0] if args else dtypes)
    return None


def warmup_manifest(path: str | os.PathLike) -> None:
    """Write to ``path`` (JSON) every kernel signature this process has compiled or loaded so far: run the program
    (or a few steps of it) first, then ``warmup(manifest=path)`` in a later process compiles them all ahead of its
    first step."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(codegen.manifest(), f, indent=1)


def _warmup_rows(ops: Iterable[str | Callable] | None, dtypes: Sequence[str]) -> None:
    """``warmup(ops, dtypes)``: the row-based approximation (see ``warmup``)."""
    classes = [op.Function if hasattr(op, "Function") else function_for(op) for op in (ROWS if ops is None else ops)]
    for dt in dtypes:
        a = np.ones(2, np.dtype(dt))
        for target in ("serial", "parallel"):
            codegen.accumulate_kernel(target)(a.copy(), a)
            for cls in classes:
                row = cls.row
                params = [a.dtype.type(0)] * len(row.params)
                codegen.row_kernel(row, "forward", "a" * row.arity, target)(a.copy(), *[a] * row.arity, *params)
                # what Elementwise.backward passes: g, then out and each input as arrays when saved, else 0
                grad_operands = [a, a if cls._saves_out else a.dtype.type(0)]
                grad_operands += [a if keep else a.dtype.type(0) for keep in cls._saves]
                pattern = "".join("a" if v is a else "s" for v in grad_operands)
                for i in range(len(row.grads)):
                    if not cls._passthrough[i]:
                        codegen.row_kernel(row, f"grad{i}", pattern, target)(a.copy(), *grad_operands, *params)
