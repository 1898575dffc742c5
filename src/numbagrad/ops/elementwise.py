"""Functions generated from the elementwise table (``scalar_math.ROWS``), one class per torch node name.

Forward and backward run generated Numba kernels. With grad mode on inside backward (``create_graph=True``) the
same gradient formula runs on Tensors instead (``Row.tensor_grad``), so double backward works for every row.
"""

from __future__ import annotations

import math
import types

import numpy as np

from .._tensor import Tensor
from ..autograd.function import Function
from ..autograd.grad_mode import state
from ..scalar_math import ROWS, Row
from ._common import as_operand, backend_of, broadcast_shapes, check_same_device, float_dtype, result_type

_BOOL_ERRORS = {
    "sub": "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, "
    "use the `~` or `logical_not()` operator instead.",
    "neg": "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use "
    "the `~` or `logical_not()` operator instead.",
}


def _check_bool_operands(row: Row, inputs) -> None:
    """torch refuses ``-`` on bools (it would be ambiguous with ``~``)."""
    if row.name in _BOOL_ERRORS and any(
        isinstance(a, bool) or (isinstance(a, Tensor) and a._data.dtype == np.bool_) for a in inputs
    ):
        raise RuntimeError(_BOOL_ERRORS[row.name])


class Elementwise(Function):
    """Base of the generated classes: ``row`` says what to compute; inputs come first, then ``row.params``."""

    row: Row
    _saves: tuple = ()  # per input: does some gradient read it?
    _saves_out = False
    _passthrough: tuple = ()
    _tensor_grads: tuple = ()

    @staticmethod
    def forward(ctx, *args):
        cls = ctx._forward_cls
        row = cls.row
        inputs, params = args[: row.arity], args[row.arity :]
        _check_bool_operands(row, inputs)
        dt = result_type(*inputs)
        if row.float_only:
            dt = float_dtype(dt)
        backend = backend_of(check_same_device(*inputs))
        arrays = [a._data if isinstance(a, Tensor) else a for a in inputs]
        shapes = {a.shape for a in arrays if not isinstance(a, (int, float, bool))}
        if len(shapes) > 1:
            broadcast_shapes(*shapes)  # torch's error text when the shapes clash
        result = Tensor._make(backend.elementwise(row, arrays, params, dt.numpy))
        ctx.save_for_backward(
            *[a if keep and isinstance(a, Tensor) else None for a, keep in zip(inputs, cls._saves)],
            result if cls._saves_out else None,
        )
        ctx.scalars = tuple(None if isinstance(a, Tensor) else a for a in inputs)
        ctx.params = params
        return result

    @staticmethod
    def backward(ctx, g):
        cls = ctx._forward_cls
        row = cls.row
        saved = ctx.saved_tensors
        n = row.arity
        values = [saved[j] if saved[j] is not None else ctx.scalars[j] for j in range(n)]
        out = saved[n]
        needed = ctx.needs_input_grad
        reuse = _reusable_input(cls, needed, ctx._grads_owned, g) if not state.enabled else None
        grads = []
        for i in range(n):
            if not needed[i]:
                grads.append(None)
            elif cls._passthrough[i]:
                grads.append(g)
            elif state.enabled:  # create_graph: differentiable formula on tensors
                grads.append(cls._tensor_grads[i](g, out, *values, *ctx.params))
            else:
                operands = [v._data if isinstance(v, Tensor) else (0 if v is None else v) for v in values]
                backend = backend_of(not isinstance(g._data, np.ndarray))
                data = backend.elementwise_grad(
                    row,
                    i,
                    g._data,
                    0 if out is None else out._data,
                    operands,
                    ctx.params,
                    g._data.dtype,
                    **({"result": g._data} if i == reuse else {}),
                )
                grads.append(Tensor._make(data))
        return (*grads, *([None] * len(ctx.params)))


def _reusable_input(cls, needed: tuple, owned: tuple, g: Tensor) -> int | None:
    """The input whose gradient may be written into ``g``'s own buffer (no allocation): the last one computed by
    a kernel, when the engine owns ``g`` and no gradient returns ``g`` itself."""
    if not (owned and owned[0]):
        return None
    last = None
    for i, need in enumerate(needed[: cls.row.arity]):
        if need:
            if cls._passthrough[i]:
                return None
            last = i
    return last


def _tensor_math() -> types.SimpleNamespace:
    """``math`` and ``select`` for tensors: what ``Row.tensor_grad`` binds when gradients run on Tensors."""
    from . import where

    def select(cond, a, b):
        if isinstance(cond, Tensor):
            return where(cond, a, b)
        return a if cond else b

    def unary(name):
        return lambda x: _FUNCTIONS[name].apply(x) if isinstance(x, Tensor) else getattr(math, name)(x)

    ns = types.SimpleNamespace(select=select, inf=math.inf, nan=math.nan, pi=math.pi, e=math.e)
    for name in ("exp", "log", "sqrt", "sin", "cos", "tan", "tanh"):
        setattr(ns, name, unary(name))
    return ns


def make_function(row_name: str | Row, class_name: str, node_name: str) -> type:
    """One Function class for a table row (or a user's ``Row``), shown in graphs as ``node_name``."""
    row = row_name if isinstance(row_name, Row) else ROWS[row_name]
    uses = [row.uses(i) for i in range(len(row.grads))]
    names = [f.__code__.co_varnames[: f.__code__.co_argcount] for f in row.grads]  # (g, out, inputs..., params...)
    cls = types.new_class(class_name, (Elementwise,), exec_body=lambda ns: ns.update(row=row, node_name=node_name))
    cls._saves = tuple(any(n[2 + j] in u for n, u in zip(names, uses)) for j in range(row.arity))
    cls._saves_out = any(n[1] in u for n, u in zip(names, uses))
    cls._passthrough = tuple(row.is_passthrough(i) for i in range(len(row.grads)))
    cls._tensor_grads = _LazyTensorGrads(row)
    return cls


class _LazyTensorGrads:
    """Tensor versions of a row's gradients, built on first double backward."""

    def __init__(self, row: Row) -> None:
        self.row = row
        self.fns = None

    def __getitem__(self, i: int):
        if self.fns is None:
            ns = _tensor_math()
            self.fns = [self.row.tensor_grad(j, ns) for j in range(len(self.row.grads))]
        return self.fns[i]


_FUNCTIONS = {
    name: make_function(name, name.capitalize(), f"{name.capitalize()}Backward0")
    for name in (
        "neg",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "reciprocal",
        "abs",
        "sin",
        "cos",
        "tan",
        "tanh",
        "sigmoid",
        "relu",
        "add",
        "sub",
        "mul",
        "div",
        "maximum",
        "minimum",
    )
}
Rsub = make_function("sub", "Rsub", "RsubBackward1")
RsubTensor = make_function("sub", "RsubTensor", "RsubBackward0")
Clamp = make_function("clamp", "Clamp", "ClampBackward1")
Pow0 = make_function("pow", "PowTensorScalar", "PowBackward0")
Pow1 = make_function("pow", "PowTensorTensor", "PowBackward1")
Pow2 = make_function("pow", "PowScalarTensor", "PowBackward2")
_FUNCTIONS["clamp"] = Clamp
_FUNCTIONS["pow"] = Pow1


def function_for(name: str) -> type:
    return _FUNCTIONS[name]


def _unary(name: str):
    fn = _FUNCTIONS[name]

    def op(x: Tensor) -> Tensor:
        return fn.apply(x)

    op.__name__ = name
    op.__doc__ = f"Elementwise ``{name}`` (row ``{name}`` of ``scalar_math.ROWS``)."
    return op


def _binary(name: str):
    fn = _FUNCTIONS[name]

    def op(x, y) -> Tensor:
        return fn.apply(as_operand(x), as_operand(y))

    op.__name__ = name
    op.__doc__ = f"Elementwise ``{name}`` with broadcasting (row ``{name}`` of ``scalar_math.ROWS``)."
    return op


neg = _unary("neg")
exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
reciprocal = _unary("reciprocal")
abs = _unary("abs")  # noqa: A001 - torch's name
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
relu = _unary("relu")
add = _binary("add")
sub = _binary("sub")
mul = _binary("mul")
div = _binary("div")
maximum = _binary("maximum")
minimum = _binary("minimum")
true_divide = divide = div
multiply = mul
subtract = sub
negative = neg


def rsub(x: Tensor, other) -> Tensor:
    """``other - x`` (what ``2 - x`` calls); torch names the tensor-tensor node ``RsubBackward0``."""
    other = as_operand(other)
    return (RsubTensor if isinstance(other, Tensor) else Rsub).apply(other, x)


def pow(x, exponent) -> Tensor:  # noqa: A001 - torch's name
    """``x ** exponent``: tensor**scalar, tensor**tensor and scalar**tensor are torch's three nodes."""
    x, exponent = as_operand(x), as_operand(exponent)
    if not isinstance(exponent, Tensor):
        return Pow0.apply(x, exponent)
    if not isinstance(x, Tensor):
        return Pow2.apply(x, exponent)
    return Pow1.apply(x, exponent)


def clamp(x: Tensor, min=None, max=None) -> Tensor:  # noqa: A002
    """Clamp into ``[min, max]``; a missing bound is unbounded. Gradient passes where ``min <= x <= max``."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        out = x
        if min is not None:
            out = maximum(out, min)
        if max is not None:
            out = minimum(out, max)
        return out
    if x._data.dtype.kind != "f":
        if isinstance(min, float) or isinstance(max, float):
            x = x.to(float_dtype(x.dtype))
        else:  # integer tensor, integer bounds: stay integer, unbounded sides at the dtype's limits
            info = np.iinfo(x._data.dtype) if x._data.dtype.kind != "b" else np.iinfo(np.int8)
            min = info.min if min is None else min
            max = info.max if max is None else max
    lo = -math.inf if min is None else min
    hi = math.inf if max is None else max
    return Clamp.apply(x, lo, hi)


clip = clamp
