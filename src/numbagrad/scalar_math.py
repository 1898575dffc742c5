"""THE elementwise table: one row per op, its scalar forward and one fused gradient per input.

Every function here is plain module-level Python using only arithmetic, comparisons, ``math`` and ``select``.
That one source is read three ways:

* the CPU backend copies it into generated ``@njit`` loops (``backend/codegen.py``);
* the CUDA backend copies it into ``cuda.jit(device=True)`` functions and grid-stride kernels;
* ``Row.tensor_grad`` re-binds ``math`` and ``select`` to tensor operations, so the same gradient formula
  also runs on Tensors with grad mode on, which is how double backward through elementwise ops works.

A gradient function has the signature ``(g, out, x[, y], *params) -> g * d out / d input``.
Adding an op means adding a row; tests for every row are generated from this table.
"""

from __future__ import annotations

import dis
import inspect
import math
import types
from dataclasses import dataclass, field

import numpy as np


def select(cond, a, b):
    """``a if cond else b``; on tensors it reads as ``where(cond, a, b)``."""
    return a if cond else b


# --- unary -------------------------------------------------------------------------------------------------
def neg(x):
    return -x


def neg_grad(g, out, x):
    return -g


def exp(x):
    return math.exp(x)


def exp_grad(g, out, x):
    return g * out


def log(x):
    return math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)


def log_grad(g, out, x):
    return g / x


def sqrt(x):
    return math.sqrt(x) if x >= 0 else math.nan


def sqrt_grad(g, out, x):
    return g / (2 * out)


def rsqrt(x):
    return 1 / math.sqrt(x) if x >= 0 else math.nan


def rsqrt_grad(g, out, x):
    return -0.5 * g * out * out * out


def reciprocal(x):
    return 1 / x


def reciprocal_grad(g, out, x):
    return -g * out * out


def abs_(x):
    return abs(x)


def abs_grad(g, out, x):
    return select(x > 0, g, select(x < 0, -g, 0.0))


def sin(x):
    return math.sin(x)


def sin_grad(g, out, x):
    return g * math.cos(x)


def cos(x):
    return math.cos(x)


def cos_grad(g, out, x):
    return -g * math.sin(x)


def tan(x):
    return math.tan(x)


def tan_grad(g, out, x):
    return g * (1 + out * out)


def tanh(x):
    return math.tanh(x)


def tanh_grad(g, out, x):
    return g * (1 - out * out)


def sigmoid(x):
    return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))


def sigmoid_grad(g, out, x):
    return g * out * (1 - out)


def relu(x):
    return select(x > 0, x, select(x != x, x, 0))  # +0 (not 0 * x = -0 for negative x), nan stays nan


def relu_grad(g, out, x):
    return select(out <= 0, 0.0, g)


def clamp(x, lo, hi):
    return select(x < lo, lo, select(x > hi, hi, x))


def clamp_grad(g, out, x, lo, hi):
    return select((x >= lo) & (x <= hi), g, 0.0)


# --- binary ------------------------------------------------------------------------------------------------
def add(x, y):
    return x + y


def add_grad_x(g, out, x, y):
    return g


def add_grad_y(g, out, x, y):
    return g


def sub(x, y):
    return x - y


def sub_grad_x(g, out, x, y):
    return g


def sub_grad_y(g, out, x, y):
    return -g


def mul(x, y):
    return x * y


def mul_grad_x(g, out, x, y):
    return g * y


def mul_grad_y(g, out, x, y):
    return g * x


def div(x, y):
    return x / y


def div_grad_x(g, out, x, y):
    return g / y


def div_grad_y(g, out, x, y):
    return -g * x / (y * y)


def pow_(x, y):
    return x**y


def pow_grad_x(g, out, x, y):
    return select(y == 0, 0.0, g * y * x ** (y - 1))


def pow_grad_y(g, out, x, y):
    return select((x == 0) & (y >= 0), 0.0, g * out * math.log(x))


def maximum(x, y):
    return select(x > y, x, select(x < y, y, x + y - x))


def maximum_grad_x(g, out, x, y):
    return select(x > y, g, select(x == y, g * 0.5, 0.0))


def maximum_grad_y(g, out, x, y):
    return select(y > x, g, select(x == y, g * 0.5, 0.0))


def minimum(x, y):
    return select(x < y, x, select(x > y, y, x + y - x))


def minimum_grad_x(g, out, x, y):
    return select(x < y, g, select(x == y, g * 0.5, 0.0))


def minimum_grad_y(g, out, x, y):
    return select(y < x, g, select(x == y, g * 0.5, 0.0))


# --- the table ---------------------------------------------------------------------------------------------
def _loaded_names(fn) -> frozenset[str]:
    """The argument names a function actually reads (so we save only what its gradient needs)."""
    return frozenset(i.argval for i in dis.get_instructions(fn) if i.opname.startswith("LOAD_FAST"))


@dataclass(frozen=True)
class Row:
    """One elementwise op.

    ``float_only`` ops promote integer inputs to the default float dtype (``exp`` of an int tensor is float).
    ``params`` are non-tensor scalar arguments after the tensor inputs (``clamp``'s bounds).
    ``domain`` is where tests draw inputs so that finite differences are meaningful.
    """

    name: str
    forward: types.FunctionType
    grads: tuple
    reference: object
    float_only: bool = False
    params: tuple = ()
    domain: tuple = (-2.0, 2.0)
    arity: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "arity", len(inspect.signature(self.forward).parameters) - len(self.params))

    def uses(self, i: int) -> frozenset[str]:
        """Which of ``g``, ``out``, ``x``, ``y`` gradient ``i`` reads."""
        return _loaded_names(self.grads[i])

    def is_passthrough(self, i: int) -> bool:
        """True when gradient ``i`` is exactly ``g`` (add's), so no kernel has to run."""
        code = self.grads[i].__code__
        return [(ins.opname, ins.argval) for ins in dis.get_instructions(code) if ins.opname != "RESUME"] == [
            ("LOAD_FAST", "g"),
            ("RETURN_VALUE", None),
        ]

    def tensor_grad(self, i: int, tensor_math) -> types.FunctionType:
        """Gradient ``i`` re-bound so ``math.*`` and ``select`` act on Tensors (differentiably)."""
        fn = self.grads[i]
        scope = dict(fn.__globals__, math=tensor_math, select=tensor_math.select)
        return types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)


def _np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


ROWS: dict[str, Row] = {
    r.name: r
    for r in [
        Row("neg", neg, (neg_grad,), np.negative),
        Row("exp", exp, (exp_grad,), np.exp, float_only=True),
        Row("log", log, (log_grad,), np.log, float_only=True, domain=(0.2, 3.0)),
        Row("sqrt", sqrt, (sqrt_grad,), np.sqrt, float_only=True, domain=(0.2, 3.0)),
        Row("rsqrt", rsqrt, (rsqrt_grad,), lambda x: 1 / np.sqrt(x), float_only=True, domain=(0.2, 3.0)),
        Row("reciprocal", reciprocal, (reciprocal_grad,), np.reciprocal, float_only=True, domain=(0.3, 3.0)),
        Row("abs", abs_, (abs_grad,), np.abs),
        Row("sin", sin, (sin_grad,), np.sin, float_only=True),
        Row("cos", cos, (cos_grad,), np.cos, float_only=True),
        Row("tan", tan, (tan_grad,), np.tan, float_only=True, domain=(-1.2, 1.2)),
        Row("tanh", tanh, (tanh_grad,), np.tanh, float_only=True),
        Row("sigmoid", sigmoid, (sigmoid_grad,), _np_sigmoid, float_only=True),
        Row("relu", relu, (relu_grad,), lambda x: np.maximum(x, 0)),
        Row("clamp", clamp, (clamp_grad,), np.clip, params=("lo", "hi")),
        Row("add", add, (add_grad_x, add_grad_y), np.add),
        Row("sub", sub, (sub_grad_x, sub_grad_y), np.subtract),
        Row("mul", mul, (mul_grad_x, mul_grad_y), np.multiply),
        Row("div", div, (div_grad_x, div_grad_y), np.true_divide, float_only=True, domain=(0.3, 3.0)),
        Row("pow", pow_, (pow_grad_x, pow_grad_y), np.power, float_only=False, domain=(0.3, 2.0)),
        Row("maximum", maximum, (maximum_grad_x, maximum_grad_y), np.maximum),
        Row("minimum", minimum, (minimum_grad_x, minimum_grad_y), np.minimum),
    ]
}
