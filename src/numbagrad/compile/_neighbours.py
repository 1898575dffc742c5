"""Fusions across op boundaries, made on a trace's steps before they are cut into groups.

A linear layer adds its bias in one more pass over its output, and a transformer block's residual add and the norm
after it each read the residual stream once more. Two rewrites remove those passes where the trace has the
pattern, and nothing outside can tell (the values they remove are read by the fused step alone):

- **A linear layer's bias into the rows after it.** ``_Linear(x, W, c)`` whose result only the next step reads, a
  table row, becomes the product ``x @ W.T`` and the row ``p + c``, which the group of rows after it takes in:
  bias + GELU (or ReLU, tanh...) in one kernel, whose backward sums the bias's gradient as the linear's did.
- **The residual add into the norm.** ``s = a + v`` followed by ``layer_norm(s)`` over the last dim becomes one
  ``ResidualLayerNorm`` step returning both; when ``v`` is a linear layer's result that only the add reads, that
  layer's bias joins the sum too (``s = a + (p + c)``). ``s`` must not be the function's result nor carry a hook or
  ``retain_grad``: the gradient arriving at the fused node's ``s`` leaves out the norm's part, which the unfused
  graph's ``s`` would have included.
"""

from __future__ import annotations

import numpy as np

from ..nn.functional import _FoldedProduct, _Linear, _Product
from ..ops.elementwise import function_for
from ..ops.nn_ops import LayerNorm, ResidualLayerNorm
from ._trace import OpStep, Trace, Value

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def fuse_neighbours(trace: Trace, uses: dict, fusable_row) -> list:
    """The trace's steps with the two rewrites made (new values are appended to ``trace.values``). ``uses``: the
    trace's ``_uses`` (value -> indices of the steps reading it, -1 for the result and method steps' effects);
    ``fusable_row(i)``: whether step ``i`` is a row the planner puts in a group."""
    add = function_for("add")
    steps, out = trace.steps, []
    i = 0
    while i < len(steps):
        fused = _residual_norm(trace, uses, add, i) or _bias_into_row(trace, uses, add, fusable_row, i)
        if fused is None:
            out.append(steps[i])
            i += 1
        else:
            replacement, taken = fused
            out.extend(replacement)
            i += taken
    return out


def _op(step, cls, arity: int) -> bool:
    """Is ``step`` a ``cls.apply`` of ``arity`` positional arguments (no keywords) with one value as its result?"""
    return (
        isinstance(step, OpStep)
        and step.cls is cls
        and not step.kwargs
        and len(step.args[1]) == arity
        and step.out[0] == "val"
    )


def _has_bias(trace: Trace, step) -> bool:
    """Is ``step`` a ``_Linear(x, W, c)`` with a bias, of a traced floating ``x`` of 2 or more dims?"""
    if not _op(step, _Linear, 3) or step.args[1][0][0] != "val" or step.args[1][2] == ("const", None):
        return False
    x = trace.values[step.args[1][0][1]]
    return len(x.shape) >= 2 and np.dtype(x.dtype) in _FLOATS


def _alike(one: Value, other: Value) -> bool:
    """Same shape, dtype and device (the fused sum takes its operands as they are)."""
    return (one.shape, np.dtype(one.dtype), one.is_cuda) == (other.shape, np.dtype(other.dtype), other.is_cuda)


def _product(trace: Trace, linear: OpStep) -> tuple:
    """(the step computing ``x @ W.T`` of ``linear``'s ``_Linear(x, W, c)``, its new value, ``c``'s template)."""
    x, weight, bias = linear.args[1]
    info = trace.values[linear.out[1]]
    trace.values.append(Value(info.shape, info.dtype, info.is_cuda))
    p = len(trace.values) - 1
    cls = _Product if len(trace.values[x[1]].shape) == 2 else _FoldedProduct
    return OpStep(cls, ("tuple", [x, weight]), None, ("val", p), linear.grad_mode), p, bias


def _bias_into_row(trace: Trace, uses: dict, add: type, fusable_row, i: int):
    """(steps, 2) for a ``_Linear`` at ``i`` whose result only the fusable row at ``i + 1`` reads; else None."""
    steps = trace.steps
    if i + 1 >= len(steps) or not _has_bias(trace, steps[i]):
        return None
    linear, row = steps[i], steps[i + 1]
    if row.grad_mode != linear.grad_mode or uses.get(linear.out[1]) != {i + 1} or not fusable_row(i + 1):
        return None
    product, p, bias = _product(trace, linear)
    return [product, OpStep(add, ("tuple", [("val", p), bias]), None, linear.out, linear.grad_mode), row], 2


def _residual_norm(trace: Trace, uses: dict, add: type, i: int):
    """(steps, taken) for ``[_Linear,] add, LayerNorm`` starting at ``i``; else None."""
    steps = trace.steps
    linear = steps[i] if _has_bias(trace, steps[i]) else None
    k = i + (linear is not None)
    if k + 1 >= len(steps) or not _op(steps[k], add, 2) or not _op(steps[k + 1], LayerNorm, 6):
        return None
    total, norm = steps[k], steps[k + 1]
    s = total.out[1]
    info = trace.values[s]
    x, weight, bias, shape, n, eps = norm.args[1]
    last = ("const", info.shape[-1] if info.shape else None)
    if (
        total.grad_mode != norm.grad_mode
        or x != ("val", s)
        or shape[0] not in ("list", "tuple")
        or list(shape[1]) != [last]
        or n != last
        or np.dtype(info.dtype) not in _FLOATS
        or any(t[0] != "val" or not _alike(trace.values[t[1]], info) for t in total.args[1])
        or any(u == -1 or not isinstance(steps[u], OpStep) for u in uses.get(s, ()))
    ):
        return None
    a, v = total.args[1]
    replacement, c = [], ("const", None)
    if linear is not None:
        out = linear.out
        if linear.grad_mode == total.grad_mode and uses.get(out[1]) == {k} and (a == out) != (v == out):
            product, p, c = _product(trace, linear)
            a = v if a == out else a  # (the other operand: the sum is a + (p + c))
            v = ("val", p)
            linear = product
        replacement.append(linear)
    args = ("tuple", [a, v, c, weight, bias, shape, n, eps])
    replacement.append(OpStep(ResidualLayerNorm, args, None, ("tuple", [("val", s), norm.out]), total.grad_mode))
    return replacement, k + 2 - i
