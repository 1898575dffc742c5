"""User-facing kernel tools: ``numbagrad.elementwise`` (a differentiable op from scalar functions) and
``numbagrad.warmup`` (compile ahead of time).

An ``elementwise`` op is a row of the same kind as the built-in table (``scalar_math.ROWS``) and runs through the
same Function class factory and generated kernels, so the path users take is the path built-ins take.
"""

from __future__ import annotations

import dis
import hashlib
import itertools
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


def warmup(ops: Iterable[str | Callable] | None = None, dtypes: Sequence[str] = ("float32", "float64")) -> None:
    """Compile (or load from the disk cache) the forward and backward kernels of ``ops`` ahead of time.

    ``ops`` names rows of the table (``"relu"``, ``"mul"``) or ops made with ``elementwise``; ``None`` means every
    row. For each dtype it compiles what a training step over tensor operands of the same shape runs: the forward
    and gradient kernels (serial and ``prange``) and the gradient accumulation. Call it at service start-up or in a
    benchmark's setup so the first real call does not pay the compile (tensor-with-scalar forms such as ``x * 2``
    are other kernels and still compile on first use).
    """

    classes = [op.Function if hasattr(op, "Function") else function_for(op) for op in (ROWS if ops is None else ops)]
    for dt in dtypes:
        a = np.ones(2, np.dtype(dt))
        for parallel in (False, True):
            codegen.accumulate_kernel("parallel" if parallel else "serial")(a.copy(), a)
            for cls in classes:
                row = cls.row
                params = [a.dtype.type(0)] * len(row.params)
                codegen.cpu_kernel(row, "forward", "a" * row.arity, parallel)(a.copy(), *[a] * row.arity, *params)
                # what Elementwise.backward passes: g, then out and each input as arrays when saved, else 0
                grad_operands = [a, a if cls._saves_out else a.dtype.type(0)]
                grad_operands += [a if keep else a.dtype.type(0) for keep in cls._saves]
                pattern = "".join("a" if v is a else "s" for v in grad_operands)
                for i in range(len(row.grads)):
                    if not cls._passthrough[i]:
                        codegen.cpu_kernel(row, f"grad{i}", pattern, parallel)(a.copy(), *grad_operands, *params)
