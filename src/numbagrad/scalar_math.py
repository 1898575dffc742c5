"""THE elementwise table: one row per op, its scalar forward and one fused gradient per input.

Every function here is plain module-level Python using only arithmetic, comparisons, ``math`` and ``select``.
That one source is read three ways:

* the CPU backend copies it into generated ``@njit`` loops (``backend/codegen.py``);
* the CUDA backend copies it into ``cuda.jit(device=True)`` functions and grid-stride kernels;
* ``Row.tensor_grad`` re-binds ``math`` and ``select`` to tensor operations, so the same gradient formula
  also runs on Tensors with grad mode on, which is how double backward through elementwise ops works.

``fma`` (``a * b + c`` rounded once) is the one other primitive: the generated kernels call the processor's
fused multiply-add for it (``codegen``), so the special functions round as torch's CPU kernels do.

A gradient function has the signature ``(g, out, x[, y], *params) -> g * d out / d input``.
Adding an op means adding a row; tests for every row are generated from this table.
"""

from __future__ import annotations

import cmath
import dataclasses
import dis
import inspect
import math
import types
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ._samples import Call, T, assigned  # noqa: F401 - the sample forms a row's ``calls`` use


def select(cond, a, b):
    """``a if cond else b``; on tensors it reads as ``where(cond, a, b)``."""
    return a if cond else b


def fma(a, b, c):
    """``a * b + c`` rounded once, as C's ``fma``. torch's CPU kernels are compiled with floating-point contraction
    for AVX2 and AVX-512, so the compiler fuses their ``a * b + c`` steps (and CUDA's do too); the special functions
    fuse the same steps to round as they do. Generated kernels replace this with the hardware instruction
    (``codegen.FMA_SOURCE``); in Python the exact sum of rationals is rounded once."""
    if math.isfinite(a) and math.isfinite(b) and math.isfinite(c):
        exact = Fraction(a) * Fraction(b) + Fraction(c)
        if exact != 0 and abs(exact) < Fraction(2) ** 1024 * (1 - Fraction(1, 2**54)):
            return float(exact)
    return a * b + c  # (zeros keep IEEE's signs; infinities and NaN come out as the unfused form's)


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
    # torch's formula: exp(-x) overflows to inf below about -88.7 in float32 (-709.8 in float64), where the result
    # is 0, not the subnormal that e / (1 + e) would give
    return 1 / (1 + math.exp(-x))


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


# --- activations (nn.functional) ----------------------------------------------------------------------------
# torch's CPU formulas (aten/src/ATen/native/cpu/Activation.cpp), so values agree to the last bits where they can.
# Gradients use only math functions that are rows themselves (exp, tanh, log, erf), so double backward works.
def hardtanh(x, min_val, max_val):
    return select(x < min_val, min_val, select(x > max_val, max_val, x))


def hardtanh_grad(g, out, x, min_val, max_val):
    return select((x > min_val) & (x < max_val), g, 0.0)  # torch: zero at the bounds themselves


def hardshrink(x, lambd):
    return select((x >= -lambd) & (x <= lambd), 0.0, x)


def shrink_grad(g, out, x, lambd):
    return select((x >= -lambd) & (x <= lambd), 0.0, g)


def softshrink(x, lambd):
    return select(x > lambd, x - lambd, select(x < -lambd, x + lambd, 0.0))


def threshold(x, threshold, value):
    return select(x <= threshold, value, x)


def threshold_grad(g, out, x, threshold, value):
    return select(x <= threshold, 0.0, g)


def leaky_relu(x, negative_slope):
    return select(x > 0, x, x * negative_slope)


def leaky_relu_grad(g, out, x, negative_slope):
    return select(x > 0, g, g * negative_slope)


def elu(x, alpha, scale, input_scale):
    return select(x > 0, x * scale, math.expm1(x * input_scale) * (alpha * scale))


def elu_grad(g, out, x, alpha, scale, input_scale):
    # torch tests x <= 0, so a nan input takes the positive side's gradient
    return select(x <= 0, g * input_scale * (alpha * scale) * math.exp(x * input_scale), g * scale)


def leaky_relu_result_grad(g, out, x, negative_slope):
    # from the result (``leaky_relu_``): it has the input's sign for the slopes >= 0 torch allows there
    return select(out > 0, g, g * negative_slope)


def elu_result_grad(g, out, x, alpha, scale, input_scale):
    # from the result (``elu_``): where it is <= 0, scale * alpha * exp(x * input_scale) is out + alpha * scale
    return select(out <= 0, g * input_scale * (out + alpha * scale), g * scale)


def gelu(x):
    return x * 0.5 * (1.0 + math.erf(x * 0.7071067811865476))


def gelu_grad(g, out, x):
    cdf = 0.5 * (1.0 + math.erf(x * 0.7071067811865476))
    return g * (cdf + x * (math.exp(-0.5 * x * x) * 0.3989422804014327))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + math.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def gelu_tanh_grad(g, out, x):
    t = math.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))
    return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * (0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x)))


def silu(x):
    return x / (1.0 + math.exp(-x))


def silu_grad(g, out, x):
    s = 1.0 / (1.0 + math.exp(-x))
    return g * s * (1.0 + x * (1.0 - s))


def mish(x):
    return x * math.tanh(math.log1p(math.exp(x)))


def mish_grad(g, out, x):
    s = 1.0 / (1.0 + math.exp(-x))
    t = math.tanh(math.log1p(math.exp(x)))  # log1p: t ~ exp(x) (not 0) for very negative x, as torch
    return g * (t + x * s * (1.0 - t * t))


def softplus(x, beta, threshold):
    return select(x * beta > threshold, x, math.log1p(math.exp(x * beta)) / beta)


def softplus_grad(g, out, x, beta, threshold):
    z = math.exp(x * beta)
    return select(x * beta > threshold, g, g * z / (z + 1.0))


def hardswish(x):
    return x * select(x + 3.0 < 0.0, 0.0, select(x + 3.0 > 6.0, 6.0, x + 3.0)) / 6.0


def hardswish_grad(g, out, x):
    return select(x <= -3.0, 0.0, select(x < 3.0, g * (x / 3.0 + 0.5), g))  # torch: the outer pieces at +-3


def hardsigmoid(x):
    return select(x + 3.0 < 0.0, 0.0, select(x + 3.0 > 6.0, 6.0, x + 3.0)) / 6.0


def hardsigmoid_grad(g, out, x):
    # torch multiplies by the float32 constant 1.0f / 6.0f in every dtype: so do we, to agree in float64 too
    return select((x > -3.0) & (x < 3.0), g * 0.16666667163372040, 0.0)


def logsigmoid(x):
    return select(x < 0, x, 0.0) - math.log1p(math.exp(-abs(x)))


def logsigmoid_grad(g, out, x):
    z = math.exp(-abs(x))
    return g * select(x < 0, 1.0 - z / (1.0 + z), z / (1.0 + z))


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


def power(x, y):
    """``x ** y`` with the shortcuts torch's kernels take for the common exponents (the same results: ``x * x``
    for 2, ``x * x * x`` for 3, ``x`` for 1, 1 for 0, ``root``'s for 0.5 and -0.5, ``inverse_power``'s for -1
    and -2). Each tests a number that a tensor ** number kernel's loop never changes, so LLVM splits the loop per
    case and vectorizes the shortcuts: ``x ** 2`` of 1e5 float32 elements took 807 us through libm's ``pow``, 9 us
    so. On Tensors (a double backward) ``Row.tensor_grad`` makes it ``x ** y``."""
    if y == 2:
        return x * x
    if y == 1:
        return x
    if y == 3:
        return x * x * x
    if y == 0:
        return y + 1  # 1 for every x, nan and inf too (x ** 0 is also x ** 1's gradient)
    if y == 0.5 or y == -0.5:
        return root(x, y)
    if y == -1 or y == -2:
        return inverse_power(x, y)
    return x**y


def root(x, y):
    """``x ** 0.5`` and ``x ** -0.5`` as torch computes them, ``sqrt(x)`` and ``1 / sqrt(x)``: they differ from
    ``pow`` at -0 (-0 and -inf, where ``pow`` gives +0 and +inf) and at -inf (nan, where ``pow`` gives inf and 0).
    Here ``pow``'s result is corrected there, with expressions of the operands' own types (a ``math.sqrt`` would
    make an integer ``x ** y`` kernel pass through float64); the CPU kernels run ``vector_math.ROOT``, which
    takes ``sqrt`` itself for floats (10x faster than ``pow``, and torch's bits where ``pow`` is an ulp off)."""
    r = x**y
    r = select(x == -math.inf, x - x, r)  # nan
    return select((x == 0) & (math.copysign(1.0, x) < 0), -r, r)


def inverse_power(x, y):
    """``x ** -1`` and ``x ** -2``, which torch computes as ``1 / x`` and ``1 / (x * x)``. Here ``pow`` (the same
    values, up to an ulp for -2); the CPU kernels run ``vector_math.INVERSE_POWER``, torch's divisions in the
    operand's own type."""
    return x**y


def pow_(x, y):
    return power(x, y)


def pow_grad_x(g, out, x, y):
    return select(y == 0, 0.0, g * y * power(x, y - 1))


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


def rsub(x, y):
    return y - x


def rsub_grad_x(g, out, x, y):
    return -g


def rsub_grad_y(g, out, x, y):
    return g


def zero_grad(g, out, x):
    return 0.0 * g


def zero_grad_param(g, out, x, p):
    return 0.0 * g


def sign(x):
    return select(x > 0, 1, select(x < 0, -1, 0))  # 0 for nan too, as torch's (not numpy's nan)


def floor(x):
    # numba's math.floor returns an integer: exact below 2**52, and every float from there up is integral already
    # (inf and nan fail the comparison and pass through); copysign keeps torch's -0. for -0.3's ceil and round
    return select(abs(x) < 4503599627370496.0, math.copysign(math.floor(x), x), x)


def ceil(x):
    return select(abs(x) < 4503599627370496.0, math.copysign(math.ceil(x), x), x)


def round_(x):
    """Round half to even, as torch; the CPU kernels run ``vector_math.ROUND_HALF_EVEN`` instead (one ``rint``)."""
    r = math.floor(x + 0.5)
    r = select((r - x == 0.5) & (math.floor(r * 0.5) * 2 != r), r - 1.0, r)  # ties to even (not r % 2: libm's fmod)
    return select(abs(x) < 4503599627370496.0, math.copysign(r, x), x)


def trunc(x):
    return select(abs(x) < 4503599627370496.0, math.copysign(math.trunc(x), x), x)


def frac(x):
    return x - trunc(x)  # inf - inf: nan, as torch


def frac_grad(g, out, x):
    return g


def _mod(x, y):
    # Python's modulo (CPU kernels call vector_math's _vmod in its place, and this where that gives nan)
    return x % y


def remainder(x, y):
    # Python's modulo: the result takes the sign of the divisor, as torch's; but a zero result keeps the dividend's
    # sign, as torch's (its fmod's zero), where Python's takes the divisor's (x * 0: that zero, or 0 for integers)
    r = _mod(x, y)
    return select(r == 0, x * 0, r)


def remainder_grad_x(g, out, x, y):
    return g


def remainder_grad_y(g, out, x, y):
    return -g * math.floor(x / y)


def _floordiv(x, y):
    # Python's floor division (CPU kernels call vector_math's _vfloordiv in its place, and this where that gives nan)
    return x // y


def floor_divide(x, y):
    return _floordiv(x, y)


def hypot(x, y):
    return math.hypot(x, y)


def hypot_grad_x(g, out, x, y):
    return g * x / out


def hypot_grad_y(g, out, x, y):
    return g * y / out


# --- more math -----------------------------------------------------------------------------------------------
def sinh(x):
    return math.sinh(x)


def sinh_grad(g, out, x):
    return g * math.cosh(x)


def cosh(x):
    return math.cosh(x)


def cosh_grad(g, out, x):
    return g * math.sinh(x)


def asin(x):
    return math.asin(x) if abs(x) <= 1 else math.nan


def asin_grad(g, out, x):
    return g / math.sqrt(1 - x * x)


def acos(x):
    return math.acos(x) if abs(x) <= 1 else math.nan


def acos_grad(g, out, x):
    return -g / math.sqrt(1 - x * x)


def atan(x):
    return math.atan(x)


def atan_grad(g, out, x):
    return g / (1 + x * x)


def atan2(y, x):
    return math.atan2(y, x)


def atan2_grad_y(g, out, y, x):
    """At the origin torch's gradient is 0 (the reciprocal of 0 counted as 0), not 0 / 0."""
    d = x * x + y * y
    return g * x * select(d == 0.0, 0.0, 1.0 / d)


def atan2_grad_x(g, out, y, x):
    d = x * x + y * y
    return -g * y * select(d == 0.0, 0.0, 1.0 / d)


def log1p(x):
    return math.log1p(x) if x > -1 else (-math.inf if x == -1 else math.nan)


def log1p_grad(g, out, x):
    return g / (x + 1)


def expm1(x):
    return math.expm1(x)


def expm1_grad(g, out, x):
    return g * (out + 1)


def log2(x):
    return math.log2(x) if x > 0 else (-math.inf if x == 0 else math.nan)


def log2_grad(g, out, x):
    return g / (x * 0.6931471805599453)  # ln 2


def log10(x):
    return math.log10(x) if x > 0 else (-math.inf if x == 0 else math.nan)


def log10_grad(g, out, x):
    return g / (x * 2.302585092994046)  # ln 10


def erf(x):
    return math.erf(x)


def erf_grad(g, out, x):
    return 1.1283791670955126 * math.exp(-(x * x)) * g  # 2 / sqrt(pi)


def erfc(x):
    return math.erfc(x)


def erfc_grad(g, out, x):
    return -1.1283791670955126 * math.exp(-(x * x)) * g


def erfinv(y):
    # A first guess from polynomials fitted to erfinv(y) / y, in w = -log(1 - y*y) below w = 5 (|y| < 0.9966) and in
    # sqrt(w) above (relative error 7e-9 and 1e-6), then one Halley step on erf(x) = |y|, which cubes that error.
    # Above 0.5 the residual is 1 - |y| - erfc(x): 1 - |y| is exact there and keeps the digits that erf(x) - |y|
    # loses near 1. |y| = 1 is infinite, |y| > 1 NaN (b: what log1p and sqrt may take, as the CUDA simulator's
    # Python math raises).
    a = abs(y)
    b = select(a < 1.0, a, 0.0)
    w = -math.log1p(-(b * b))
    v = w - 2.5
    central = ((((((((-8.941414092622527e-09 * v + 2.3264800105395088e-08) * v + 4.682669737136756e-07) * v
                    - 3.463093069405434e-06) * v - 4.973069670020772e-06) * v + 0.0002183458867723732) * v
                 - 0.001252725226910636) * v - 0.004177388473878919) * v
               + 0.2466402784807851) * v + 1.5014093595818212  # fmt: skip
    v = math.sqrt(w) - 3.0
    tail = ((((((((-2.266298034203639e-06 * v + 4.06855496618045e-05) * v - 0.00030536399662512917) * v
                 + 0.0012650210795415152) * v - 0.0032441674844803864) * v + 0.0056513230063442365) * v
              - 0.007759881070498666) * v + 0.00947421408227562) * v
            + 1.0016870953237207) * v + 2.8329754844738924  # fmt: skip
    x = b * select(w < 5.0, central, tail)
    r = select(b > 0.5, (1.0 - b) - math.erfc(x), math.erf(x) - b)
    x = x - r / (1.1283791670955126 * math.exp(-(x * x)) + x * r)  # (x - t / (1 + x t), t = r / erf'(x))
    return select(a < 1.0, math.copysign(x, y), select(a == 1.0, math.copysign(math.inf, y), math.nan))


def erfinv_grad(g, out, x):
    return 0.886226925452758 * math.exp(out * out) * g  # sqrt(pi) / 2 * exp(erfinv(x) ** 2)


def lgamma(x):
    if x <= 0.0 and x == math.floor(x):  # the poles (Python's math, under the CUDA simulator, raises there)
        return math.inf
    return math.lgamma(x)


def lgamma_grad(g, out, x):
    return g * digamma(x)


def digamma(x):
    # Negative x by reflection, psi(x) = psi(1 - x) - pi / tan(pi x) (NaN at the poles, as torch); then the
    # recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10 and the asymptotic series there (error < 1e-16).
    if x == 0.0:
        return math.copysign(math.inf, -x)
    reflection = 0.0
    if x < 0.0:
        if x == math.floor(x):
            return math.nan
        reflection = -math.pi / math.tan(math.pi * x)
        x = 1.0 - x
    result = reflection
    while x < 10.0:
        result -= 1.0 / x
        x += 1.0
    z = 1.0 / (x * x)
    series = z * (1 / 12 - z * (1 / 120 - z * (1 / 252 - z * (1 / 240 - z * (1 / 132 - z * (691 / 32760 - z / 12))))))
    return result + math.log(x) - 0.5 / x - series


def digamma_grad(g, out, x):
    return g * polygamma(x, 1.0)


def hurwitz_zeta(s, q):
    # zeta(s, q) = sum over k >= 0 of (q + k) ** -s: the first terms summed (at least 10, until q + k > 9), then
    # the Euler-Maclaurin tail with Bernoulli numbers (Cephes' algorithm); inf at non-positive integer q.
    if s == 1.0:
        return math.inf
    if s < 1.0:
        return math.nan
    if q <= 0.0:
        if q == math.floor(q):
            return math.inf
        if s != math.floor(s):
            return math.nan
    eps = 1.1102230246251565e-16
    total = q**-s
    a = q
    b = 0.0
    i = 0
    while i < 9 or a <= 9.0:
        i += 1
        a += 1.0
        b = a**-s
        total += b
        if -eps * total < b < eps * total:
            return total
    bernoulli = (  # (2j)! / B_2j
        12.0,
        -720.0,
        30240.0,
        -1209600.0,
        47900160.0,
        -1.8924375803183791606e9,
        7.47242496e10,
        -2.950130727918164224e12,
        1.1646782814350067249e14,
        -4.5979787224074726105e15,
        1.8152105401943546773e17,
        -7.1661652561756670113e18,
    )
    w = a
    total += b * w / (s - 1.0)
    total = fma(-0.5, b, total)  # (torch's two steps, the second fused)
    factor = 1.0
    k = 0.0
    for j in range(12):
        factor *= s + k
        b /= w
        t = factor * b / bernoulli[j]
        total += t
        if abs(t / total) < eps:
            return total
        k += 1.0
        factor *= s + k
        b /= w
        k += 1.0
    return total


def polygamma(x, n):
    # The n-th derivative of digamma: (-1) ** (n + 1) n! zeta(n + 1, x) for n >= 1.
    if n == 0.0:
        return digamma(x)
    sign = 1.0 if n % 2.0 == 1.0 else -1.0
    return sign * math.exp(math.lgamma(n + 1.0)) * hurwitz_zeta(n + 1.0, x)


def polygamma_grad(g, out, x, n):
    return g * polygamma(x, n + 1.0)


# --- special functions (torch.special) ----------------------------------------------------------------------
# Ports of the Cephes algorithms torch uses (aten/src/ATen/native/Math.h): the same expansions and coefficients,
# so values agree with torch's to the last bits or so. Coefficient tuples are local so the functions stay
# portable into generated kernels; ``chbevl`` and ``polevl`` are the two series evaluators they share.
def chbevl(x, coefficients):
    # Clenshaw's recurrence for a Chebyshev series, coefficients from the highest order down (Cephes' chbevl)
    b0 = coefficients[0]
    b1 = 0.0
    b2 = 0.0
    for i in range(1, len(coefficients)):
        b2 = b1
        b1 = b0
        b0 = fma(x, b1, -b2) + coefficients[i]
    return 0.5 * (b0 - b2)


def polevl(x, coefficients):
    # Horner's rule, coefficients from the highest power down
    result = 0.0
    for i in range(len(coefficients)):
        result = fma(result, x, coefficients[i])
    return result


def i0e_series(a):
    # exp(-a) I0(a) for 0 <= a <= 8, exp(-a) sqrt(a) I0(a) beyond: Chebyshev series in a/2 - 2 and in 32/a - 2
    if a <= 8.0:
        return chbevl(a / 2.0 - 2.0, (
            -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
            1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
            -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
            9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-09,
            -1.30002500998624804212e-08, 6.04699502254191894932e-08, -2.67079385394061173391e-07,
            1.11738753912010371815e-06, -4.41673835845875056359e-06, 1.64484480707288970893e-05,
            -5.75419501008210370398e-05, 1.88502885095841655729e-04, -5.76375574538582365885e-04,
            1.63947561694133579842e-03, -4.32430999505057594430e-03, 1.05464603945949983183e-02,
            -2.37374148058994688156e-02, 4.93052842396707084878e-02, -9.49010970480476444210e-02,
            1.71620901522208775349e-01, -3.04682672343198398683e-01, 6.76795274409476084995e-01))  # fmt: skip
    return chbevl(32.0 / a - 2.0, (
        -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
        3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
        1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
        -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
        7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
        -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
        3.39623202570838634515e-09, 2.26666899049817806459e-08, 2.04891858946906374183e-07,
        2.89137052083475648297e-06, 6.88975834691682398426e-05, 3.36911647825569408990e-03,
        8.04490411014108831608e-01))  # fmt: skip


def i0e(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # exp(-|x|) I0(x)
    a = abs(x)
    if a <= 8.0:
        return i0e_series(a)
    return i0e_series(a) / math.sqrt(a)


def i0e_grad(g, out, x):
    return g * (i1e(x) - select(x > 0, out, select(x < 0, -out, 0.0)))  # i1e(x) - sgn(x) i0e(x)


def i0(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # the modified Bessel function of the first kind, order 0, rounded as torch's: exp(a) times the series, then
    # over sqrt(a)
    a = abs(x)
    if a <= 8.0:
        return math.exp(a) * i0e_series(a)
    return math.exp(a) * i0e_series(a) / math.sqrt(a)


def i0_grad(g, out, x):
    return g * i1(x)


def i1e_series(a):
    # exp(-a) I1(a) / a for 0 <= a <= 8, exp(-a) sqrt(a) I1(a) beyond: Chebyshev series in a/2 - 2 and in 32/a - 2
    if a <= 8.0:
        return chbevl(a / 2.0 - 2.0, (
        2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
        -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
        3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
        -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-09,
        9.38153738649577178388e-09, -4.44505912879632808065e-08, 2.00329475355213526229e-07,
        -8.56872026469545474066e-07, 3.47025130813767847674e-06, -1.32731636560394358279e-05,
        4.78156510755005422638e-05, -1.61760815825896745588e-04, 5.12285956168575772895e-04,
        -1.51357245063125314899e-03, 4.15642294431288815669e-03, -1.05640848946261981558e-02,
        2.47264490306265168283e-02, -5.29459812080949914269e-02, 1.02643658689847095384e-01,
        -1.76416518357834055153e-01, 2.52587186443633654823e-01))  # fmt: skip
    return chbevl(32.0 / a - 2.0, (
        7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17,
        -3.20952592199342395980e-17, 2.96262899764595013876e-16, 3.30820231092092828324e-16,
        -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
        4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
        -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11,
        3.25260358301548823856e-11, -1.89749581235054123450e-11, -5.58974346219658380687e-10,
        -3.83538038596423702205e-09, -2.63146884688951950684e-08, -2.51223623787020892529e-07,
        -3.88256480887769039346e-06, -1.10588938762623716291e-04, -9.76109749136146840777e-03,
        7.78576235018280120474e-01))  # fmt: skip


def i1e(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # exp(-|x|) I1(x), odd
    a = abs(x)
    if a <= 8.0:
        out = i1e_series(a) * a
    else:
        out = i1e_series(a) / math.sqrt(a)
    return select(x < 0.0, -out, out)


def i1e_grad(g, out, x):
    # i0e(x) - i1e(x) (sgn(x) + 1/x); 1/2 at 0
    return g * select(x == 0.0, 0.5, i0e(x) - out * (select(x > 0, 1.0, -1.0) + 1.0 / x))


def i1(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # the modified Bessel function of the first kind, order 1 (odd), rounded as torch.special.i1: exp(a) a times
    # the series below 8, exp(a) times it over sqrt(a) above
    a = abs(x)
    if a <= 8.0:
        out = math.exp(a) * a * i1e_series(a)
    else:
        out = math.exp(a) * i1e_series(a) / math.sqrt(a)
    return select(x < 0.0, -out, out)


def i1_grad(g, out, x):
    return g * select(x == 0.0, 0.5, i0(x) - out / x)


def modified_bessel_i1(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # I1 as torch.special.modified_bessel_i1 rounds it: the series times a, then exp(a), below 8
    a = abs(x)
    if a <= 8.0:
        out = i1e_series(a) * a * math.exp(a)
    else:
        out = math.exp(a) * i1e_series(a) / math.sqrt(a)
    return select(x < 0.0, -out, out)


def k0_parts(x, small):
    # K0 for 0 < x <= 2 (``small``: a Chebyshev series in x*x - 2 plus I0's logarithmic term), else
    # exp(x) sqrt(x) K0(x) (a series in 8/x - 2); fused and ordered as torch's
    if small:
        return fma(-math.log(0.5 * x), i0(x), chbevl(fma(x, x, -2.0), (
            1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11,
            1.90451637722020886025e-09, 2.53479107902614945675e-07, 2.28621210311945178607e-05,
            1.26461541144692592338e-03, 3.59799365153615016266e-02, 3.44289899924628486886e-01,
            -5.35327393233902768720e-01)))  # fmt: skip
    return chbevl(8.0 / x - 2.0, (
        5.30043377268626276149e-18, -1.64758043015242134646e-17, 5.21039150503902756861e-17,
        -1.67823109680541210385e-16, 5.51205597852431940784e-16, -1.84859337734377901440e-15,
        6.34007647740507060557e-15, -2.22751332699166985548e-14, 8.03289077536357521100e-14,
        -2.98009692317273043925e-13, 1.14034058820847496303e-12, -4.51459788337394416547e-12,
        1.85594911495471785253e-11, -7.95748924447710747776e-11, 3.57739728140030116597e-10,
        -1.69753450938905987466e-09, 8.57403401741422608519e-09, -4.66048989768794782956e-08,
        2.76681363944501510342e-07, -1.83175552271911948767e-06, 1.39498137188764993662e-05,
        -1.28495495816278026384e-04, 1.56988388573005337491e-03, -3.14481013119645005427e-02,
        2.44030308206595545468e+00))  # fmt: skip


def k0(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # the modified Bessel function of the second kind, order 0 (inf at 0, NaN below)
    if x == 0.0:
        return math.inf
    if x < 0.0:
        return math.nan
    if x <= 2.0:
        return k0_parts(x, True)
    return math.exp(-x) * k0_parts(x, False) / math.sqrt(x)


def k0e(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # exp(x) K0(x)
    if x == 0.0:
        return math.inf
    if x < 0.0:
        return math.nan
    if x <= 2.0:
        return k0_parts(x, True) * math.exp(x)
    return k0_parts(x, False) / math.sqrt(x)


def k1_parts(x, small):
    # K1 for 0 < x <= 2 (``small``: a Chebyshev series in x*x - 2 over x plus I1's logarithmic term), else
    # exp(x) sqrt(x) K1(x) (a series in 8/x - 2); fused and ordered as torch's
    if small:
        return fma(math.log(0.5 * x), modified_bessel_i1(x), chbevl(fma(x, x, -2.0), (
            -7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
            -1.41148839263352776110e-10, -2.21338763073472585583e-08, -2.43340614156596823496e-06,
            -1.73028895751305206302e-04, -6.97572385963986435018e-03, -1.22611180822657148235e-01,
            -3.53155960776544875667e-01, 1.52530022733894777053e+00)) / x)  # fmt: skip
    return chbevl(8.0 / x - 2.0, (
        -5.75674448366501715755e-18, 1.79405087314755922667e-17, -5.68946255844285935196e-17,
        1.83809354436663880070e-16, -6.05704724837331885336e-16, 2.03870316562433424052e-15,
        -7.01983709041831346144e-15, 2.47715442448130437068e-14, -8.97670518232499435011e-14,
        3.34841966607842919884e-13, -1.28917396095102890680e-12, 5.13963967348173025100e-12,
        -2.12996783842756842877e-11, 9.21831518760500529508e-11, -4.19035475934189648750e-10,
        2.01504975519703286596e-09, -1.03457624656780970260e-08, 5.74108412545004946722e-08,
        -3.50196060308781257119e-07, 2.40648494783721712015e-06, -1.93619797416608296024e-05,
        1.95215518471351631108e-04, -2.85781685962277938680e-03, 1.03923736576817238437e-01,
        2.72062619048444266945e+00))  # fmt: skip


def k1(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # the modified Bessel function of the second kind, order 1 (inf at 0, NaN below)
    if x == 0.0:
        return math.inf
    if x < 0.0:
        return math.nan
    if x <= 2.0:
        return k1_parts(x, True)
    return math.exp(-x) * k1_parts(x, False) / math.sqrt(x)


def k1e(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # exp(x) K1(x)
    if x == 0.0:
        return math.inf
    if x < 0.0:
        return math.nan
    if x <= 2.0:
        return k1_parts(x, True) * math.exp(x)
    return k1_parts(x, False) / math.sqrt(x)


def bessel_asymptotic(x, w, phase, pp, pq, qp, qq, second_kind):
    # J or Y of order 0 or 1 beyond 5: sqrt(2 / (pi x)) (P cos(x - phase) - 5/x Q sin(x - phase)), the sine and
    # cosine exchanged (and the sign) for Y; P and Q are rational functions of w = 25 / x**2
    p = polevl(w, pp) / polevl(w, pq)
    q = 5.0 / x * (polevl(w, qp) / polevl(w, qq))
    # (the first product fused into the sum, as the compiler fuses torch's)
    if second_kind:
        v = fma(p, math.sin(x - phase), q * math.cos(x - phase))
    else:
        v = fma(p, math.cos(x - phase), -(q * math.sin(x - phase)))
    return v * 0.797884560802865355879892119868763737 / math.sqrt(x)


def bessel_j0(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # the Bessel function of the first kind, order 0: a rational function with its first two zeros up to 5
    x = abs(x)
    if x <= 5.0:
        if x < 0.00001:
            return 1.0 - x * x / 4.0
        z = x * x
        rp = polevl(z, (-4.79443220978201773821e+09, 1.95617491946556577543e+12, -2.49248344360967716204e+14,
                        9.70862251047306323952e+15))  # fmt: skip
        rq = polevl(z, (4.99563147152651017219e+02, 1.73785401676374683123e+05, 4.84409658339962045305e+07,
                        1.11855537045356834862e+10, 2.11277520115489217587e+12, 3.10518229857422583814e+14,
                        3.18121955943204943306e+16, 1.71086294081043136091e+18))  # fmt: skip
        return (z - 5.78318596294678452118e00) * (z - 3.04712623436620863991e01) * rp / rq
    return bessel_asymptotic(x, 25.0 / (x * x), 0.785398163397448309615660845819875721, (
        7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e+00,
        5.44725003058768775090e+00, 8.74716500199817011941e+00, 5.30324038235394892183e+00,
        9.99999999999999997821e-01), (
        9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e+00,
        5.47097740330417105182e+00, 8.76190883237069594232e+00, 5.30605288235394617618e+00,
        1.00000000000000000218e+00), (
        -1.13663838898469149931e-02, -1.28252718670509318512e+00, -1.95539544257735972385e+01,
        -9.32060152123768231369e+01, -1.77681167980488050595e+02, -1.47077505154951170175e+02,
        -5.14105326766599330220e+01, -6.05014350600728481186e+00), (
        6.43178256118178023184e+01, 8.56430025976980587198e+02, 3.88240183605401609683e+03,
        7.24046774195652478189e+03, 5.93072701187316984827e+03, 2.06209331660327847417e+03,
        2.42005740240291393179e+02), False)  # fmt: skip


def bessel_j1(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # the Bessel function of the first kind, order 1 (odd): a rational function with its first two zeros up to 5
    a = abs(x)
    if a <= 5.0:
        z = a * a
        rp = polevl(z, (-8.99971225705559398224e+08, 4.52228297998194034323e+11, -7.27494245221818276015e+13,
                        3.68295732863852883286e+15))  # fmt: skip
        rq = polevl(z, (6.20836478118054335476e+02, 2.56987256757748830383e+05, 8.35146791431949253037e+07,
                        2.21511595479792499675e+10, 4.74914122079991414898e+12, 7.84369607876235854894e+14,
                        8.95222336184627338078e+16, 5.32278620332680085395e+18))  # fmt: skip
        out = rp / rq * a * (z - 1.46819706421238932572e01) * (z - 4.92184563216946036703e01)
    else:
        out = bessel_asymptotic(a, 5.0 / a * (5.0 / a), 2.356194490192344928846982537459627163, (
            7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e+00,
            5.11207951146807644818e+00, 8.42404590141772420927e+00, 5.21451598682361504063e+00,
            1.00000000000000000254e+00), (
            5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e+00,
            5.07386386128601488557e+00, 8.39985554327604159757e+00, 5.20982848682361821619e+00,
            9.99999999999999997461e-01), (
            5.10862594750176621635e-02, 4.98213872951233449420e+00, 7.58238284132545283818e+01,
            3.66779609360150777800e+02, 7.10856304998926107277e+02, 5.97489612400613639965e+02,
            2.11688757100572135698e+02, 2.52070205858023719784e+01), (
            7.42373277035675149943e+01, 1.05644886038262816351e+03, 4.98641058337653607651e+03,
            9.56231892404756170795e+03, 7.99704160447350683650e+03, 2.82619278517639096600e+03,
            3.36093607810698293419e+02), False)  # fmt: skip
    return select(x < 0.0, -out, out)


def bessel_y0(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # the Bessel function of the second kind, order 0: -inf at 0, NaN below
    if x <= 5.0:
        if x == 0.0:
            return -math.inf
        if x < 0.0:
            return math.nan
        z = x * x
        yp = polevl(z, (1.55924367855235737965e+04, -1.46639295903971606143e+07, 5.43526477051876500413e+09,
                        -9.82136065717911466409e+11, 8.75906394395366999549e+13, -3.46628303384729719441e+15,
                        4.42733268572569800351e+16, -1.84950800436986690637e+16))  # fmt: skip
        yq = polevl(z, (1.04128353664259848412e+03, 6.26107330137134956842e+05, 2.68919633393814121987e+08,
                        8.64002487103935000337e+10, 2.02979612750105546709e+13, 3.17157752842975028269e+15,
                        2.50596256172653059228e+17))  # fmt: skip
        return fma(0.636619772367581343075535053490057448 * math.log(x), bessel_j0(x), yp / yq)
    return bessel_asymptotic(x, 25.0 / (x * x), 0.785398163397448309615660845819875721, (
        7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e+00,
        5.44725003058768775090e+00, 8.74716500199817011941e+00, 5.30324038235394892183e+00,
        9.99999999999999997821e-01), (
        9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e+00,
        5.47097740330417105182e+00, 8.76190883237069594232e+00, 5.30605288235394617618e+00,
        1.00000000000000000218e+00), (
        -1.13663838898469149931e-02, -1.28252718670509318512e+00, -1.95539544257735972385e+01,
        -9.32060152123768231369e+01, -1.77681167980488050595e+02, -1.47077505154951170175e+02,
        -5.14105326766599330220e+01, -6.05014350600728481186e+00), (
        6.43178256118178023184e+01, 8.56430025976980587198e+02, 3.88240183605401609683e+03,
        7.24046774195652478189e+03, 5.93072701187316984827e+03, 2.06209331660327847417e+03,
        2.42005740240291393179e+02), True)  # fmt: skip


def bessel_y1(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # the Bessel function of the second kind, order 1: -inf at 0, NaN below
    if x <= 5.0:
        if x == 0.0:
            return -math.inf
        if x < 0.0:
            return math.nan
        z = x * x
        yp = polevl(z, (1.26320474790178026440e+09, -6.47355876379160291031e+11, 1.14509511541823727583e+14,
                        -8.12770255501325109621e+15, 2.02439475713594898196e+17,
                        -7.78877196265950026825e+17))  # fmt: skip
        yq = polevl(z, (5.94301592346128195359e+02, 2.35564092943068577943e+05, 7.34811944459721705660e+07,
                        1.87601316108706159478e+10, 3.88231277496238566008e+12, 6.20557727146953693363e+14,
                        6.87141087355300489866e+16, 3.97270608116560655612e+18))  # fmt: skip
        return fma(x, yp / yq, 0.636619772367581343075535053490057448 * fma(bessel_j1(x), math.log(x), -(1.0 / x)))
    return bessel_asymptotic(x, 5.0 / x * (5.0 / x), 2.356194490192344928846982537459627163, (
        7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e+00,
        5.11207951146807644818e+00, 8.42404590141772420927e+00, 5.21451598682361504063e+00,
        1.00000000000000000254e+00), (
        5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e+00,
        5.07386386128601488557e+00, 8.39985554327604159757e+00, 5.20982848682361821619e+00,
        9.99999999999999997461e-01), (
        5.10862594750176621635e-02, 4.98213872951233449420e+00, 7.58238284132545283818e+01,
        3.66779609360150777800e+02, 7.10856304998926107277e+02, 5.97489612400613639965e+02,
        2.11688757100572135698e+02, 2.52070205858023719784e+01), (
        7.42373277035675149943e+01, 1.05644886038262816351e+03, 4.98641058337653607651e+03,
        9.56231892404756170795e+03, 7.99704160447350683650e+03, 2.82619278517639096600e+03,
        3.36093607810698293419e+02), True)  # fmt: skip


def airy_ai(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # Airy's Ai: the Maclaurin series of its two fundamental solutions on [-2.09, 2.09], the asymptotic
    # rational expansions in zeta = 2/3 |x| ** 1.5 outside; NaN at +-inf, 0 beyond 103.892
    if x == math.inf or x == -math.inf:
        return math.nan
    if x > 103.892:
        return 0.0
    if x < -2.09:
        t = -2.0 * x * math.sqrt(-x) / 3.0
        z = 1.0 / t
        zz = z * z
        afn = polevl(zz, (
            -1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
            -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
            -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08))  # fmt: skip
        afd = polevl(zz, (
            1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01,
            9.18707402907259625840e+00, 1.47529146771666414581e+00, 1.15687173795188044134e-01,
            4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07))  # fmt: skip
        agn = polevl(zz, (
            1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00,
            9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
            5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
            8.11789239554389293311e-08, 3.41551784765923618484e-10))  # fmt: skip
        agd = polevl(zz, (
            9.30892908077441974853e+00, 1.98352928718312140417e+01, 1.55646628932864612953e+01,
            5.47686069422975497931e+00, 9.54293611618961883998e-01, 8.64580826352392193095e-02,
            4.12656523824222607191e-03, 1.01259085116509135510e-04, 1.17166733214413521882e-06,
            4.91834570062930015649e-09))  # fmt: skip
        phase = t + 0.25 * math.pi
        return (
            5.64189583547756286948e-01
            / math.sqrt(math.sqrt(-x))
            * fma(math.sin(phase), 1.0 + zz * afn / afd, -(math.cos(phase) * (z * agn / agd)))
        )
    if x >= 2.09:
        zeta = 2.0 * x * math.sqrt(x) / 3.0
        an = polevl(1.0 / zeta, (
            3.46538101525629032477e-01, 1.20075952739645805542e+01, 7.62796053615234516538e+01,
            1.68089224934630576269e+02, 1.59756391350164413639e+02, 7.05360906840444183113e+01,
            1.40264691163389668864e+01, 9.99999999999999995305e-01))  # fmt: skip
        ad = polevl(1.0 / zeta, (
            5.67594532638770212846e-01, 1.47562562584847203173e+01, 8.45138970141474626562e+01,
            1.77318088145400459522e+02, 1.64234692871529701831e+02, 7.14778400825575695274e+01,
            1.40959135607834029598e+01, 1.00000000000000000470e+00))  # fmt: skip
        return 5.64189583547756286948e-01 * (an / ad) / (2.0 * math.sqrt(math.sqrt(x)) * math.exp(zeta))
    f = 1.0
    g = x
    k = 1.0
    m = 1.0
    n = x
    t = 1.0
    z = x * x * x
    while t > 2.220446049250313e-16:
        m *= z
        k += 1.0
        m /= k
        n *= z
        k += 1.0
        n /= k
        m /= k
        f += m
        k += 1.0
        n /= k
        g += n
        t = abs(m / f)
    return fma(0.355028053887817239260, f, -(0.258819403792806798405 * g))


def spherical_bessel_j0(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # sin(x) / x, by its Taylor series below 0.5
    if x == math.inf or x == -math.inf:
        return 0.0
    if abs(x) < 0.5:
        z = x * x
        p = fma(z, 1.0 / 6227020800.0, -1.0 / 39916800.0)  # (each step fused, as torch's)
        p = fma(z, p, 1.0 / 362880.0)
        p = fma(z, p, -1.0 / 5040.0)
        p = fma(z, p, 1.0 / 120.0)
        p = fma(z, p, -1.0 / 6.0)
        return fma(z, p, 1.0)
    return math.sin(x) / x


# --- orthogonal polynomials: torch's recurrences, the degree ``n`` truncated to an integer --------------------
def polynomial_degree(n):
    # torch casts the degree to an integer (truncating); NaN and infinities count as negative degrees (zero)
    if n != n or n == math.inf or n == -math.inf:
        return -1.0
    if abs(n) >= 4503599627370496.0:  # (2 ** 52: already an integer)
        return n
    return float(math.floor(n)) if n >= 0.0 else float(math.ceil(n))


def chebyshev_recurrence(y, q, n):
    # p_k = 2 y p_(k-1) - p_(k-2) from p_0 = 1 and p_1 = q up to k = n, stopping once a value is NaN
    p = 1.0
    k = 2.0
    while k <= n and q == q:
        r = fma(y + y, q, -p)  # (fused, as torch's compiled recurrence)
        p = q
        q = r
        k += 1.0
    return q


def chebyshev_polynomial_t(x, n):
    x, n = x * 1.0, n * 1.0  # (float32 data: computed in float64)
    n = polynomial_degree(n)
    if n < 0.0:
        return 0.0
    if abs(x) == 1.0:
        return 1.0 if x > 0.0 or n % 2.0 == 0.0 else -1.0
    if n > 6.0 and abs(x) < 1.0:
        return math.cos(n * math.acos(x))
    if n == 0.0:
        return 1.0
    return chebyshev_recurrence(x, x, n)


def chebyshev_polynomial_u(x, n):
    x, n = x * 1.0, n * 1.0  # (float32 data: computed in float64)
    n = polynomial_degree(n)
    if n < 0.0:
        return 0.0
    if abs(x) == 1.0:
        return n + 1.0 if x > 0.0 or n % 2.0 == 0.0 else -(n + 1.0)
    if n > 8.0 and abs(x) < 1.0:
        theta = math.acos(x)
        if math.sin(theta) != 0.0:
            return math.sin((n + 1.0) * theta) / math.sin(theta)
        return (n + 1.0) * math.cos((n + 1.0) * theta) / x
    if n == 0.0:
        return 1.0
    return chebyshev_recurrence(x, x + x, n)


def chebyshev_polynomial_v(x, n):
    x, n = x * 1.0, n * 1.0  # (float32 data: computed in float64)
    n = polynomial_degree(n)
    if n < 0.0:
        return 0.0
    if abs(x) == 1.0:
        if x > 0.0:
            return 1.0
        return n + n + 1.0 if n % 2.0 == 0.0 else -(n + n + 1.0)
    if n > 8.0 and abs(x) < 1.0:
        theta = math.acos(x)
        if math.sin(theta / 2.0) != 1.0:
            return math.cos((n + 0.5) * theta) / math.cos(theta / 2.0)
        return n + n + 1.0 if n % 2.0 == 0.0 else -(n + n + 1.0)
    if n == 0.0:
        return 1.0
    return chebyshev_recurrence(x, x + x - 1.0, n)


def chebyshev_polynomial_w(x, n):
    x, n = x * 1.0, n * 1.0  # (float32 data: computed in float64)
    n = polynomial_degree(n)
    if n < 0.0:
        return 0.0
    if abs(x) == 1.0:
        if x > 0.0:
            return n + n + 1.0
        return 1.0 if n % 2.0 == 0.0 else -1.0
    if n > 8.0 and abs(x) < 1.0:
        theta = math.acos(x)
        if math.cos(theta / 2.0) != 1.0:
            return math.sin((n + 0.5) * theta) / math.sin(theta / 2.0)
        if x > 0.0:
            return n + n + 1.0
        return 1.0 if n % 2.0 == 0.0 else -1.0
    if n == 0.0:
        return 1.0
    return chebyshev_recurrence(x, x + x + 1.0, n)


def shifted_chebyshev_polynomial_t(x, n):
    x, n = x * 1.0, n * 1.0  # (float32 data: computed in float64)
    # T_n(2x - 1)
    n = polynomial_degree(n)
    if n < 0.0:
        return 0.0
    if x == 1.0:
        return 1.0
    if x == 0.0:
        return 1.0 if n % 2.0 == 0.0 else -1.0
    y = x + x - 1.0
    if n > 6.0 and abs(y) < 1.0:
        return math.cos(n * math.acos(y))
    if n == 0.0:
        return 1.0
    return chebyshev_recurrence(y, y, n)


def shifted_chebyshev_polynomial_u(x, n):
    x, n = x * 1.0, n * 1.0  # (float32 data: computed in float64)
    # U_n(2x - 1)
    n = polynomial_degree(n)
    if n < 0.0:
        return 0.0
    if x == 1.0:
        return n + 1.0
    if x == 0.0:
        return n + 1.0 if n % 2.0 == 0.0 else -(n + 1.0)
    y = x + x - 1.0
    if n > 6.0 and abs(y) < 1.0:
        theta = math.acos(y)
        if math.sin(theta) != 0.0:
            return math.sin((n + 1.0) * theta) / math.sin(theta)
        return (n + 1.0) * math.cos((n + 1.0) * theta) / y
    if n == 0.0:
        return 1.0
    return chebyshev_recurrence(y, y + y, n)


def shifted_chebyshev_polynomial_v(x, n):
    x, n = x * 1.0, n * 1.0  # (float32 data: computed in float64)
    # V_n(2x - 1)
    n = polynomial_degree(n)
    if n < 0.0:
        return 0.0
    if x == 1.0:
        return 1.0
    if x == 0.0:
        return n + n + 1.0 if n % 2.0 == 0.0 else -(n + n + 1.0)
    y = x + x - 1.0
    if n > 6.0 and abs(y) < 1.0:
        theta = math.acos(y)
        if math.sin(theta / 2.0) != 1.0:
            return math.cos((n + 0.5) * theta) / math.cos(theta / 2.0)
        return n + n + 1.0 if n % 2.0 == 0.0 else -(n + n + 1.0)
    if n == 0.0:
        return 1.0
    return chebyshev_recurrence(y, y + y - 1.0, n)


def shifted_chebyshev_polynomial_w(x, n):
    x, n = x * 1.0, n * 1.0  # (float32 data: computed in float64)
    # W_n(2x - 1)
    n = polynomial_degree(n)
    if n < 0.0:
        return 0.0
    if x == 1.0:
        return n + n + 1.0
    if x == 0.0:
        return 1.0 if n % 2.0 == 0.0 else -1.0
    y = x + x - 1.0
    if n > 4.0 and abs(y) < 1.0:
        theta = math.acos(y)
        if math.cos(theta / 2.0) != 1.0:
            return math.sin((n + 0.5) * theta) / math.sin(theta / 2.0)
        return 1.0 if n % 2.0 == 0.0 else -1.0
    if n == 0.0:
        return 1.0
    return chebyshev_recurrence(y, y + y + 1.0, n)


def hermite_polynomial_h(x, n):
    x, n = x * 1.0, n * 1.0  # (float32 data: computed in float64)
    # the physicists' Hermite polynomial: H_(k+1) = 2x H_k - 2k H_(k-1); NaN above degree 512
    n = polynomial_degree(n)
    if n < 0.0:
        return 0.0
    if n == 0.0:
        return 1.0
    if n == 1.0:
        return x + x
    if n > 512.0:
        return math.nan
    p = 1.0
    q = x + x
    k = 2.0
    while k < n + n:
        r = fma(x + x, q, -(k * p))  # (the first product fused, as torch's compiled recurrence)
        p = q
        q = r
        k += 2.0
    return q


def hermite_polynomial_he(x, n):
    x, n = x * 1.0, n * 1.0  # (float32 data: computed in float64)
    # the probabilists' Hermite polynomial: He_(k+1) = x He_k - k He_(k-1); NaN above degree 512
    n = polynomial_degree(n)
    if n < 0.0:
        return 0.0
    if n == 0.0:
        return 1.0
    if n == 1.0:
        return x
    if n > 512.0:
        return math.nan
    p = 1.0
    q = x
    k = 1.0
    while k < n:
        r = fma(x, q, -(k * p))  # (the first product fused, as torch's compiled recurrence)
        p = q
        q = r
        k += 1.0
    return q


def laguerre_polynomial_l(x, n):
    x, n = x * 1.0, n * 1.0  # (float32 data: computed in float64)
    # L_(k+1) = ((2k + 1 - x) L_k - k L_(k-1)) / (k + 1), stopping once a value is NaN
    n = polynomial_degree(n)
    if n < 0.0:
        return 0.0
    if x == 0.0 or n == 0.0:
        return 1.0
    p = 1.0
    q = 1.0 - x
    k = 1.0
    while k < n and q == q:
        r = fma((k + k) + (1.0 - x), q, -(k * p)) / (k + 1.0)  # (the first product fused, as torch's)
        p = q
        q = r
        k += 1.0
    return q


def legendre_polynomial_p(x, n):
    x, n = x * 1.0, n * 1.0  # (float32 data: computed in float64)
    # P_(k+1) = ((2k + 1) x P_k - k P_(k-1)) / (k + 1), stopping once a value is NaN
    n = polynomial_degree(n)
    if n < 0.0:
        return 0.0
    if abs(x) == 1.0:
        return 1.0 if x > 0.0 or n % 2.0 == 0.0 else -1.0
    if n == 0.0:
        return 1.0
    p = 1.0
    q = x
    k = 1.0
    while k < n and q == q:
        r = fma((k + k + 1.0) * x, q, -(k * p)) / (k + 1.0)  # (the first product fused, as torch's)
        p = q
        q = r
        k += 1.0
    return q


# --- error-function relatives, entropy, incomplete gamma ----------------------------------------------------
def exp_square(x, factor):
    # factor * exp(x * x) without the error of rounding x * x first: x * x = hi + lo exactly (the fused product's
    # rounding error), exp(hi + lo) = exp(hi) (1 + lo) to the last bit, the factor taken in before the last step
    hi = x * x
    lo = fma(x, x, -hi)
    v = factor * math.exp(hi)
    return fma(v, lo, v)


def erfcx(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # exp(x * x) erfc(x): the product while erfc(x) is a normal number (x < 26), the continued fraction
    # 1 / sqrt(pi) / (x + 1/2 / (x + 1 / (x + 3/2 / ...))) beyond; negative x by erfcx(-x) = 2 exp(x * x) - erfcx(x)
    if x != x:
        return x
    a = abs(x)
    if a < 26.0:
        positive = exp_square(a, math.erfc(a))
    else:
        tail = 0.0
        k = 40.0
        while k > 0.0:
            tail = (k / 2.0) / (a + tail)
            k -= 1.0
        positive = 0.56418958354775628694807945156 / (a + tail)
    if x >= 0.0:
        return positive
    if x < -26.7:
        return math.inf
    return exp_square(x, 2.0) - positive


def erfcx_grad(g, out, x):
    return g * (2.0 * x * out - 1.1283791670955126)  # 2 x erfcx(x) - 2 / sqrt(pi)


def log_ndtr(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # log of the standard normal CDF: log(erfcx(-t) / 2) - t * t below -1 (no underflow), log1p(-erfc(t) / 2) above
    t = x * 0.7071067811865476
    if x < -1.0:
        return fma(-t, t, math.log(erfcx(-t) / 2.0))
    return math.log1p(-math.erfc(t) / 2.0)


def log_ndtr_grad(g, out, x):
    return g * 0.3989422804014327 * math.exp(-(out + x * x / 2.0))  # exp(-x*x/2) / sqrt(2 pi) / ndtr(x)


def ndtri(y):
    y = y * 1.0  # (float32 data: computed in float64)
    # the inverse of the standard normal CDF (Cephes' ndtri): a rational function of y - 1/2 in the middle,
    # of 1 / sqrt(-2 log y) in the tails
    if y == 0.0:
        return -math.inf
    if y == 1.0:
        return math.inf
    if y < 0.0 or y > 1.0 or y != y:
        return math.nan
    upper = y > 1.0 - 0.13533528323661269189
    if upper:
        y = 1.0 - y
    if y > 0.13533528323661269189:
        y = y - 0.5
        y2 = y * y
        p0 = polevl(y2, (-5.99633501014107895267e1, 9.80010754185999661536e1, -5.66762857469070293439e1,
                         1.39312609387279679503e1, -1.23916583867381258016e0))  # fmt: skip
        q0 = polevl(y2, (1.0, 1.95448858338141759834e0, 4.67627912898881538453e0, 8.63602421390890590575e1,
                         -2.25462687854119370527e2, 2.00260212380060660359e2, -8.20372256168333339912e1,
                         1.59056225126211695515e1, -1.18331621121330003142e0))  # fmt: skip
        return fma(y, y2 * p0 / q0, y) * 2.50662827463100050242e0
    x = math.sqrt(-2.0 * math.log(y))
    x0 = x - math.log(x) / x
    z = 1.0 / x
    if x < 8.0:
        x1 = z * polevl(z, (
            4.05544892305962419923e0, 3.15251094599893866154e1, 5.71628192246421288162e1,
            4.40805073893200834700e1, 1.46849561928858024014e1, 2.18663306850790267539e0,
            -1.40256079171354495875e-1, -3.50424626827848203418e-2, -8.57456785154685413611e-4)) / polevl(z, (
            1.0, 1.57799883256466749731e1, 4.53907635128879210584e1, 4.13172038254672030440e1,
            1.50425385692907503408e1, 2.50464946208309415979e0, -1.42182922854787788574e-1,
            -3.80806407691578277194e-2, -9.33259480895457427372e-4))  # fmt: skip
    else:
        x1 = z * polevl(z, (
            3.23774891776946035970e0, 6.91522889068984211695e0, 3.93881025292474443415e0,
            1.33303460815807542389e0, 2.01485389549179081538e-1, 1.23716634817820021358e-2,
            3.01581553508235416007e-4, 2.65806974686737550832e-6, 6.23974539184983293730e-9)) / polevl(z, (
            1.0, 6.02427039364742014255e0, 3.67983563856160859403e0, 1.37702099489081330271e0,
            2.16236993594496635890e-1, 1.34204006088543189037e-2, 3.28014464682127739104e-4,
            2.89247864745380683936e-6, 6.79019408009981274425e-9))  # fmt: skip
    x = x0 - x1
    return x if upper else -x


def ndtri_grad(g, out, x):
    return g * 2.5066282746310002 * math.exp(out * out / 2.0)  # sqrt(2 pi) exp(ndtri(x) ** 2 / 2)


def entr(x):
    x = x * 1.0  # (float32 data: computed in float64)
    # -x log x: 0 at 0, -inf for negative x
    if x != x:
        return x
    if x > 0.0:
        return -x * math.log(x)
    if x == 0.0:
        return 0.0
    return -math.inf


def entr_grad(g, out, x):
    return g * -(1.0 + math.log(x))


def xlog1py(x, y):
    x, y = x * 1.0, y * 1.0  # (float32 data: computed in float64)
    # x log1p(y), 0 where x is 0 (NaN where y is NaN)
    if y != y:
        return math.nan
    if x == 0.0:
        return 0.0
    return x * math.log1p(y)


def xlog1py_grad_x(g, out, x, y):
    return select((x == 0.0) & (y <= -1.0), 0.0, xlog1py(g, y))


def xlog1py_grad_y(g, out, x, y):
    return g * x / (y + 1.0)


def zeta(x, q):
    x, q = x * 1.0, q * 1.0  # (float32 data: computed in float64)
    # the Hurwitz zeta function (polygamma's)
    return hurwitz_zeta(x, q)


def zeta_grad_q(g, out, x, q):
    return g * -x * zeta(x + 1.0, q)


def no_formula_grad(g, out, x, y):
    # the place of an input torch has no derivative formula for: its backward raises before any kernel runs
    # (``Row.no_grad``), so this never computes
    return g * math.nan


def lanczos_sum_expg_scaled(a):
    # Boost's Lanczos sum (g = 6.0246800407767296), scaled by exp(-g): a ratio of degree-12 polynomials,
    # evaluated in 1/a above 1
    num = (0.006061842346248906525783753964555936883222, 0.5098416655656676188125178644804694509993,
           19.51992788247617482847860966235652136208, 449.9445569063168119446858607650988409623,
           6955.999602515376140356310115515198987526, 75999.29304014542649875303443598909137092,
           601859.6171681098786670226533699352302507, 3481712.15498064590882071018964774556468,
           14605578.08768506808414169982791359218571, 43338889.32467613834773723740590533316085,
           86363131.28813859145546927288977868422342, 103794043.1163445451906271053616070238554,
           56906521.91347156388090791033559122686859)  # fmt: skip
    den = (1.0, 66.0, 1925.0, 32670.0, 357423.0, 2637558.0, 13339535.0, 45995730.0, 105258076.0, 150917976.0,
           120543840.0, 39916800.0, 0.0)  # fmt: skip
    if abs(a) > 1.0:
        y = 1.0 / a
        n = num[12]
        d = den[12]
        for i in range(11, -1, -1):
            n = fma(n, y, num[i])
            d = fma(d, y, den[i])
        return n / d
    n = num[0]
    d = den[0]
    for i in range(1, 13):
        n = fma(n, a, num[i])
        d = fma(d, a, den[i])
    return n / d


def igamma_prefactor(a, x):
    # x ** a exp(-x) / gamma(a), through the Lanczos approximation where x is near a (no cancellation)
    if abs(a - x) > 0.4 * abs(a):
        ax = fma(a, math.log(x), -x) - math.lgamma(a)  # (fused as torch's compiled kernel)
        if ax < -709.782712893383996843:
            return 0.0
        return math.exp(ax)
    g = 6.024680040776729583740234375
    fac = a + g - 0.5
    res = math.sqrt(fac / 2.718281828459045) / lanczos_sum_expg_scaled(a)
    if a < 200.0 and x < 200.0:
        return res * (math.exp(a - x) * (x / fac) ** a)
    numfac = (x - a - g + 0.5) / fac
    return res * math.exp(fma(a, math.log1p(numfac) - numfac, x * (0.5 - g) / fac))


def igamma_series(a, x):
    # the lower regularized incomplete gamma function by its power series (DLMF 8.11.4)
    ax = igamma_prefactor(a, x)
    if ax == 0.0:
        return 0.0
    r = a
    c = 1.0
    total = 1.0
    i = 0
    while i < 100000:
        r += 1.0
        c *= x / r
        total += c
        if c <= 1.11022302462515654042e-16 * total:
            break
        i += 1
    return total * ax / a


def igammac_series(a, x):
    # the upper regularized incomplete gamma function for small x (DLMF 8.7.3), without cancellation
    fac = 1.0
    total = 0.0
    n = 1.0
    while n < 2000.0:
        fac *= -x / n
        term = fac / (a + n)
        total += term
        if abs(term) <= 1.11022302462515654042e-16 * abs(total):
            break
        n += 1.0
    logx = math.log(x)
    term = -math.expm1(fma(a, logx, -math.lgamma(1.0 + a)))
    return fma(-math.exp(fma(a, logx, -math.lgamma(a))), total, term)


def igammac_continued_fraction(a, x):
    # the upper regularized incomplete gamma function by its continued fraction (DLMF 8.9.2)
    ax = igamma_prefactor(a, x)
    if ax == 0.0:
        return 0.0
    y = 1.0 - a
    z = x + y + 1.0
    c = 0.0
    pkm2 = 1.0
    qkm2 = x
    pkm1 = x + 1.0
    qkm1 = z * x
    ans = pkm1 / qkm1
    i = 0
    while i < 100000:
        c += 1.0
        y += 1.0
        z += 2.0
        yc = y * c
        pk = fma(pkm1, z, -(pkm2 * yc))
        qk = fma(qkm1, z, -(qkm2 * yc))
        t = 1.0
        if qk != 0.0:
            r = pk / qk
            t = abs((ans - r) / r)
            ans = r
        pkm2 = pkm1
        pkm1 = pk
        qkm2 = qkm1
        qkm1 = qk
        if abs(pk) > 4.503599627370496e15:
            pkm2 *= 2.22044604925031308085e-16
            pkm1 *= 2.22044604925031308085e-16
            qkm2 *= 2.22044604925031308085e-16
            qkm1 *= 2.22044604925031308085e-16
        if t <= 1.11022302462515654042e-16:
            break
        i += 1
    return ans * ax


def igammac(a, x):
    a, x = a * 1.0, x * 1.0  # (float32 data: computed in float64)
    # the upper regularized incomplete gamma function Q(a, x) = Gamma(a, x) / Gamma(a), for a, x >= 0
    if x < 0.0 or a < 0.0:
        return math.nan
    if a == 0.0:
        return 0.0 if x > 0.0 else math.nan
    if x == 0.0:
        return 1.0
    if a == math.inf:
        return math.nan if x == math.inf else 1.0
    if x == math.inf:
        return 0.0
    if a != a or x != x:
        return math.nan
    if x > 1.1:
        if x < a:
            return 1.0 - igamma_series(a, x)
        return igammac_continued_fraction(a, x)
    if x <= 0.5:
        if -0.4 / math.log(x) < a:
            return 1.0 - igamma_series(a, x)
        return igammac_series(a, x)
    if x * 1.1 < a:
        return 1.0 - igamma_series(a, x)
    return igammac_series(a, x)


def igammac_grad_x(g, out, a, x):
    return -g * math.exp((a - 1.0) * math.log(x) - x - math.lgamma(a))


def igamma(a, x):
    a, x = a * 1.0, x * 1.0  # (float32 data: computed in float64)
    # the lower regularized incomplete gamma function P(a, x) = gamma(a, x) / Gamma(a), for a, x >= 0
    if x < 0.0 or a < 0.0:
        return math.nan
    if a == 0.0:
        return 1.0 if x > 0.0 else math.nan
    if x == 0.0:
        return 0.0
    if a == math.inf:
        return math.nan if x == math.inf else 0.0
    if x == math.inf:
        return 1.0
    if a != a or x != x:
        return math.nan
    if x > 1.0 and x > a:
        return 1.0 - igammac(a, x)
    return igamma_series(a, x)


def igamma_grad_x(g, out, a, x):
    return g * math.exp((a - 1.0) * math.log(x) - x - math.lgamma(a))


def asinh(x):
    return math.asinh(x)


def asinh_grad(g, out, x):
    return g / math.sqrt(x * x + 1)


def acosh(x):
    return math.acosh(x) if x >= 1 else math.nan


def acosh_grad(g, out, x):
    return g / math.sqrt(x * x - 1)


def atanh(x):
    # (libm's atanh is +-inf at +-1 and nan beyond; Python's raises there, as the CUDA simulator runs it)
    return math.atanh(x) if abs(x) < 1 else select(abs(x) == 1, x * math.inf, math.nan)


def atanh_grad(g, out, x):
    return g / (1 - x * x)


def exp2(x):
    return 2.0**x


def exp2_grad(g, out, x):
    return g * out * 0.6931471805599453  # ln 2


def deg2rad(x):
    return x * 0.017453292519943295  # pi / 180, as torch multiplies


def deg2rad_grad(g, out, x):
    return g * 0.017453292519943295


def rad2deg(x):
    return x * 57.29577951308232  # 180 / pi


def rad2deg_grad(g, out, x):
    return g * 57.29577951308232


def sinc(x):
    p = math.pi * x
    return select(x == 0, 1.0, math.sin(p) / p)


def sinc_grad(g, out, x):
    p = math.pi * x
    return select(x == 0, 0.0, g * (p * math.cos(p) - math.sin(p)) / (p * x))


def logit(x, eps):
    # torch's: a negative eps (None) leaves x as it is, else x is clamped into [eps, 1 - eps] first
    z = select(eps < 0, x, select(x < eps, eps, select(x > 1 - eps, 1 - eps, x)))
    return log(z / (1 - z))


def logit_grad(g, out, x, eps):
    # torch's: nan outside [0, 1] without eps, 0 outside [eps, 1 - eps] with it
    outside = select(eps < 0, (x < 0) | (x > 1), (x < eps) | (x > 1 - eps))
    return select(outside, select(eps < 0, math.nan, 0.0), g / (x * (1 - x)))


def xlogy(x, y):
    # torch's: nan for a nan y, 0 where x is 0 (even for y = 0 or inf), else x * log(y)
    return select(y != y, y, select(x == 0, 0.0, x * log(y)))


def xlogy_grad_x(g, out, x, y):
    # torch's: xlogy(g, y), and 0 where x is 0 and y <= 0 (not where x is 0 alone)
    return select((x == 0) & (y <= 0), 0.0, select(y != y, y, select(g == 0, 0.0, g * math.log(y))))


def xlogy_grad_y(g, out, x, y):
    return g * x / y


def logaddexp(x, y):
    # torch's: the larger plus log1p(exp(-|x - y|)), and an infinity added to itself is itself
    m = select(x < y, y, x)
    return select((x == y) & (abs(x) == math.inf), x, m + math.log1p(math.exp(-abs(x - y))))


def logaddexp_grad_x(g, out, x, y):
    return g / (1 + math.exp(y - x))


def logaddexp_grad_y(g, out, x, y):
    return g / (1 + math.exp(x - y))


def logaddexp2(x, y):
    m = select(x < y, y, x)
    d = math.exp(-abs(x - y) * 0.6931471805599453)  # 2 ** -|x - y|
    return select((x == y) & (abs(x) == math.inf), x, m + math.log1p(d) * 1.4426950408889634)  # / ln 2


def logaddexp2_grad_x(g, out, x, y):
    return g / (1 + 2.0 ** (y - x))


def logaddexp2_grad_y(g, out, x, y):
    return g / (1 + 2.0 ** (x - y))


def copysign(x, y):
    return math.copysign(x, y)


def copysign_grad_x(g, out, x, y):
    return select(x == 0, 0.0, g * out / x)  # torch's: the sign the result took, 0 at x = 0


def copysign_grad_y(g, out, x, y):
    return 0.0 * g


def fmax(x, y):
    return select(x != x, y, select(y != y, x, select(x < y, y, x)))  # nan only where both are


def fmax_grad_x(g, out, x, y):
    return select((x >= y) | (y != y), g, 0.0)


def fmax_grad_y(g, out, x, y):
    return select((x >= y) | (y != y), 0.0, g)


def fmin(x, y):
    return select(x != x, y, select(y != y, x, select(y < x, y, x)))


def fmin_grad_x(g, out, x, y):
    return select((x <= y) | (y != y), g, 0.0)


def fmin_grad_y(g, out, x, y):
    return select((x <= y) | (y != y), 0.0, g)


def heaviside(x, values):
    return select(x == 0, values, select(x > 0, 1, 0))


def _fmod(x, y):
    # C's fmod (the result takes the dividend's sign). Numba has no math.fmod; Python's modulo of the magnitudes is
    # exact and equals it, and a zero dividend keeps its sign (-0.0 stays -0.0, as in torch). CPU kernels call
    # vector_math's _vfmod in its place, and this where that gives nan.
    m = abs(x) % abs(y)
    return select(x > 0, m, select(x < 0, -m, select(m == 0, x, m)))


def fmod(x, y):
    return _fmod(x, y)


def fmod_grad_x(g, out, x, y):
    return g


def fmod_grad_y(g, out, x, y):
    return -g * math.trunc(x / y)


def square(x):
    return x * x


def square_grad(g, out, x):
    return g * (2 * x)


def lerp(x, y, w):
    # torch's formula: the form that is exact at each end, chosen by the weight's size
    return select(abs(w) < 0.5, x + w * (y - x), y - (y - x) * (1 - w))


def lerp_grad_x(g, out, x, y, w):
    return g * (1 - w)


def lerp_grad_y(g, out, x, y, w):
    return g * w


def lerp_grad_w(g, out, x, y, w):
    return g * (y - x)


def lerp_scalar(x, y, weight):
    return select(abs(weight) < 0.5, x + weight * (y - x), y - (y - x) * (1 - weight))


def lerp_scalar_grad_x(g, out, x, y, weight):
    return g * (1 - weight)


def lerp_scalar_grad_y(g, out, x, y, weight):
    return g * weight


def nan_to_num(x, nan, posinf, neginf):
    return select(x != x, nan, select(x == math.inf, posinf, select(x == -math.inf, neginf, x)))


def nan_to_num_grad(g, out, x, nan, posinf, neginf):
    return select((x == x) & (x != math.inf) & (x != -math.inf), g, 0.0)


def clamp_min(x, lo):
    return select(lo != lo, lo, select(x < lo, lo, x))  # a NaN bound or input gives NaN, as torch


def clamp_min_grad_x(g, out, x, lo):
    return select(x >= lo, g, 0.0)


def clamp_min_grad_lo(g, out, x, lo):
    return select(x < lo, g, 0.0)


def clamp_max(x, hi):
    return select(hi != hi, hi, select(x > hi, hi, x))


def clamp_max_grad_x(g, out, x, hi):
    return select(x <= hi, g, 0.0)


def clamp_max_grad_hi(g, out, x, hi):
    return select(x > hi, g, 0.0)


def clamp_tensor(x, lo, hi):
    m = select(lo != lo, lo, select(x < lo, lo, x))  # min(max(x, lo), hi): with lo > hi the result is hi
    return select(hi != hi, hi, select(m > hi, hi, m))


def clamp_tensor_grad_x(g, out, x, lo, hi):
    return select((x >= lo) & (x <= hi), g, 0.0)


def clamp_tensor_grad_lo(g, out, x, lo, hi):
    return select((x < lo) & (lo < hi), g, 0.0)


def clamp_tensor_grad_hi(g, out, x, lo, hi):
    return select((x > hi) | (hi < lo), g, 0.0)


def round_decimals(x, decimals):
    # torch's round(decimals=d): nearbyint(x * 10**d) / 10**d, or for d < 0 nearbyint(x / 10**-d) * 10**-d
    p = 10.0 ** abs(decimals)
    v = select(decimals < 0, x / p, x * p)
    r = round_(v)
    return select(decimals < 0, r * p, r / p)


def addcmul(x, y, z, value):
    return x + value * y * z


def addcmul_grad_x(g, out, x, y, z, value):
    return g


def addcmul_grad_y(g, out, x, y, z, value):
    return g * (z * value)


def addcmul_grad_z(g, out, x, y, z, value):
    return g * (y * value)


def addcdiv(x, y, z, value):
    return x + value * y / z


def addcdiv_grad_x(g, out, x, y, z, value):
    return g


def addcdiv_grad_y(g, out, x, y, z, value):
    return g * (value / z)


def addcdiv_grad_z(g, out, x, y, z, value):
    return -g * (value * y / (z * z))


# --- comparisons and predicates: bool results, no gradient --------------------------------------------------
def eq(x, y):
    return x == y


def ne(x, y):
    return x != y


def lt(x, y):
    return x < y


def le(x, y):
    return x <= y


def gt(x, y):
    return x > y


def ge(x, y):
    return x >= y


def isnan(x):
    return x != x


def isinf(x):
    return (x == math.inf) | (x == -math.inf)


def isfinite(x):
    return (x == x) & (x != math.inf) & (x != -math.inf)


def signbit(x):
    return math.copysign(1.0, x) < 0


def isneginf(x):
    return x == -math.inf


def isposinf(x):
    return x == math.inf


def logical_not(x):
    return x == 0


def logical_and(x, y):
    return (x != 0) & (y != 0)


def logical_or(x, y):
    return (x != 0) | (y != 0)


def logical_xor(x, y):
    return (x != 0) != (y != 0)


def bitwise_and(x, y):
    return x & y


def bitwise_or(x, y):
    return x | y


def bitwise_xor(x, y):
    return x ^ y


def bitwise_not(x):
    return ~x


# --- the table ---------------------------------------------------------------------------------------------
def _loaded_names(fn) -> frozenset[str]:
    """The argument names a function actually reads (so we save only what its gradient needs)."""
    return frozenset(i.argval for i in dis.get_instructions(fn) if i.opname.startswith("LOAD_FAST"))


@dataclass(frozen=True)
class Row:
    """One elementwise op: everything numbagrad knows about it, declared once.

    Math: ``forward`` and one fused gradient per input (``grads``; none for ops without a gradient), a numpy
    ``reference`` used only by tests, and ``domain``, where tests draw inputs so finite differences are meaningful.

    Types: ``float_only`` ops promote integer inputs to the default float dtype (``exp`` of an int tensor is
    float); ``out_bool`` ops compute in the promoted dtype and return bool (comparisons, ``isnan``);
    ``integral_only`` ops refuse floating point inputs (the bitwise ops), ``floating_only`` ops integer ones
    (``frac``); ``integer_division`` ops raise torch's
    ``ZeroDivisionError`` for an integer divisor of zero.

    Names (``ops/elementwise.py`` builds everything public from them): ``node`` is the graph node torch prints,
    or a dict from operand kinds (``"tt"``, ``"ts"``, ``"st"``: tensor or scalar per input) to node names;
    ``names`` the ``numbagrad.*`` functions (the first is canonical), ``methods`` the Tensor methods (default: the
    names), ``operators`` the Tensor operators (``__radd__`` style names take the operands reflected),
    ``inplace`` whether each method has a ``<method>_`` in-place form, ``alpha`` whether the op takes torch's
    ``alpha=`` keyword (``other * alpha``). ``params`` are non-tensor scalar arguments after the tensor inputs
    (``clamp``'s bounds); ``frontend=False`` means ``ops/elementwise.py`` writes the public function by hand
    because torch's signature needs more than the table says (``clamp``, ``pow``).

    Precision: a row computes float32 data in float64 and rounds once (correctly rounded results, as libm's float32
    functions), unless ``float32_math``: then its CPU kernels run float32 arithmetic on float32 data (the float32
    twins of ``backend/vector_math.py``, within an ulp or two, as torch's vectorized float32 kernels are), which
    makes the activations 2-3x faster (sigmoid of 1e5 elements: 160 us in float64, 50 us; torch 50 us); log, tanh,
    log1p, expm1 and erf are ``float32_math`` too (tanh of 1e5 float32 elements: 202 us, 61 us; torch 262 us). exp
    is not: the float32 expf is an ulp off at exp(4), which then prints 54.5982 where torch prints 54.5981.
    ``fix_up``: the row's CPU kernels call the fast versions of sin, cos, tan, fmod, %, // and erfc and recompute with
    the exact ones the results that come out nan (``codegen._map_kernel``), so its functions must carry such a nan to
    their result.

    ``libm``: the row's CPU kernels call libm's ``exp``, ``log``, ``sqrt`` and the others, not the vectorizable
    versions of ``backend/vector_math.py`` (within 1.5 ulp of libm's): the special functions torch computes with
    libm, whose results numbagrad's match to the last bit or two only from the same ``exp`` and ``log``.

    ``doc``: what the op computes, in one line: the first line of its public function's and in-place method's
    docstrings.

    ``no_bool``: the name of torch's kernel that refuses bool input (``"abs_cpu"``), for its NotImplementedError.

    ``number_operands``: the positions of the public function's operands that may be Python numbers (torch's
    ``maximum(t, 1.5)`` is a TypeError: none; ``lt(1.5, t)`` too: only the second); the operators take numbers
    anywhere.

    ``graph=False``: torch records no graph for the op (its result never requires grad: the Bessel functions and
    orthogonal polynomials of ``torch.special``), so the public function computes on detached operands.
    ``no_formula``: the inputs (by position) torch has no derivative formula for, with its NotImplementedError
    text, raised by backward when such an input needs a gradient (``zeta``'s ``x``, ``igamma``'s ``a``).

    ``calls``: the row's samples written as expressions (``numbagrad._samples.Call``: its operators, reflected
    operators and in-place forms, with the node torch names each), for the generated tests (``tests/samples.py``).
    """

    name: str
    forward: types.FunctionType
    grads: tuple
    reference: object
    node: str | dict | None = None
    names: tuple = ()
    methods: tuple | None = None
    operators: tuple = ()
    inplace: bool = True
    alpha: bool = False
    frontend: bool = True
    float_only: bool = False
    out_bool: bool = False
    integral_only: bool = False
    floating_only: bool = False
    integer_division: bool = False
    params: tuple = ()
    domain: tuple = (-2.0, 2.0)
    float32_math: bool = False
    fix_up: bool = False
    libm: bool = False
    doc: str = ""
    number_operands: tuple = (0, 1)
    no_bool: str = ""
    graph: bool = True
    no_formula: dict = field(default_factory=dict)
    calls: tuple = ()
    arity: int = field(init=False)
    out_dtype: object = field(init=False)  # the result's dtype when it is not the computation's (bool), else None
    # whether the row's CPU kernels evaluate transcendental functions (``float32_math``'s, ``libm``'s or the fixed-up
    # ones): several times arithmetic's cost an element, so sharing their loops among threads pays from fewer
    # elements (``backend/cpu.py``'s ``SHARED_ELEMENTS``)
    costly: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "arity", len(inspect.signature(self.forward).parameters) - len(self.params))
        object.__setattr__(self, "out_dtype", np.dtype(np.bool_) if self.out_bool else None)
        object.__setattr__(self, "costly", self.float32_math or self.libm or self.fix_up)
        if not self.names:
            object.__setattr__(self, "names", (self.name,))
        if self.methods is None:
            object.__setattr__(self, "methods", self.names)

    @property
    def differentiable(self) -> bool:
        """True when the row has gradients (comparisons and other integer-valued rows do not)."""
        return bool(self.grads)

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
        scope = dict(fn.__globals__, math=tensor_math, select=tensor_math.select, power=_tensor_power)
        called = {i.argval for i in dis.get_instructions(fn) if i.opname == "LOAD_GLOBAL"}
        scope.update({name: op for name, op in tensor_math.rows.items() if name in called})  # digamma, polygamma
        return types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)


def _tensor_power(x, y):
    """``power`` on Tensors: no shortcut tests (a Tensor exponent has no single value)."""
    return x**y


def _quiet(fn):
    """A numpy reference that returns NaN outside its domain without warning (as the kernels do)."""

    def reference(*args):
        with np.errstate(invalid="ignore", divide="ignore"):
            return fn(*args)

    return reference


def _np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _np_erf(x, fn=math.erf):
    return np.vectorize(fn, otypes=[np.asarray(x).dtype])(x)


def _np_erfinv(y):
    """erfinv by bisection on erf (erfc near 1) down to two adjacent floats: slow, simple, independent."""

    def solve(v: float) -> float:
        if not 0 < abs(v) < 1:
            return v if v == 0 else math.copysign(math.inf, v) if abs(v) == 1 else math.nan
        a, lo, hi = abs(v), 0.0, 27.0  # (erfc(27) underflows)
        mid = 13.5
        while lo < mid < hi:  # (above 0.5, erfc against 1 - a, which is exact, resolves a near 1)
            lo, hi = (mid, hi) if (math.erfc(mid) > 1 - a if a > 0.5 else math.erf(mid) < a) else (lo, mid)
            mid = lo + (hi - lo) / 2
        return math.copysign(hi, v)

    return np.vectorize(solve, otypes=[np.asarray(y).dtype])(y)


def _np_lgamma(x):
    return np.vectorize(math.lgamma, otypes=[np.asarray(x).dtype])(x)


def _np_polygamma_one(x: float, n: int) -> float:
    """The n-th polygamma by a plain sum of 40 terms of ``(-1) ** (n + 1) n! / (x + k) ** (n + 1)`` plus the
    integral of the rest and its first Euler-Maclaurin corrections (digamma: ``log`` minus the terms)."""
    m = 40
    if n == 0:
        head = -sum(1.0 / (x + k) for k in range(m))
        y = x + m
        return head + math.log(y) - 0.5 / y - 1 / (12 * y**2) + 1 / (120 * y**4) - 1 / (252 * y**6)
    s = n + 1
    y = x + m
    head = sum((x + k) ** -s for k in range(m))
    tail = y ** (1 - s) / (s - 1) + 0.5 * y**-s + s * y ** (-s - 1) / 12 - s * (s + 1) * (s + 2) * y ** (-s - 3) / 720
    return (-1) ** (n + 1) * math.factorial(n) * (head + tail)


def _np_digamma(x):
    return np.vectorize(lambda v: _np_polygamma_one(float(v), 0), otypes=[np.asarray(x).dtype])(x)


def _np_polygamma(x, n):
    return np.vectorize(lambda v: _np_polygamma_one(float(v), int(n)), otypes=[np.asarray(x).dtype])(x)


def _np_logit(x, eps):
    z = x if eps < 0 else np.clip(x, eps, 1 - eps)
    return np.log(z / (1 - z))


def _np_softplus(x, beta, threshold):
    return np.where(x * beta > threshold, x, np.log1p(np.exp(x * beta)) / beta)


def _np_hardsigmoid(x):
    return np.clip(x + 3, 0, 6) / 6


def _mp_reference(fn):
    """A numpy reference from ``fn(mpmath, *values)`` evaluated at 40 digits: an independent oracle for the
    special functions (tests only; mpmath comes with torch's sympy). Complex or undefined values read as NaN."""

    def reference(*args):
        import mpmath

        arrays = np.broadcast_arrays(*[np.asarray(a) for a in args])
        dtype = next((a.dtype for a in arrays if a.dtype.kind == "f"), np.dtype(np.float64))
        values = []
        with mpmath.workdps(40):
            for point in zip(*(a.ravel().tolist() for a in arrays)):
                try:
                    v = mpmath.mpmathify(fn(mpmath, *(mpmath.mpf(float(p)) for p in point)))
                except (ValueError, ZeroDivisionError):
                    v = mpmath.nan
                values.append(float(v.real) if mpmath.im(v) == 0 else math.nan)
        return np.array(values, dtype=dtype).reshape(arrays[0].shape if arrays else ())

    return reference


def _mp_polynomial(fn):
    """``_mp_reference`` of a polynomial family ``fn(mpmath, x, n)``, the degree truncated as torch does."""
    return _mp_reference(lambda m, x, n: 0 if int(n) < 0 else fn(m, x, int(n)))


def _mp_zeta(m, x, q):
    """The Hurwitz zeta function in mpmath numbers, infinite at ``x = 1`` (mpmath raises there)."""
    return m.inf if x == 1 else m.zeta(x, q)


def _mp_laguerre(m, x, n):
    """``L_n(x)`` by its explicit sum, in mpmath numbers."""
    return sum((-x) ** k * m.binomial(n, k) / m.factorial(k) for k in range(n + 1))


def _mp_recurrence(m, y, first, n):
    """The Chebyshev recurrence ``p_k = 2 y p_(k-1) - p_(k-2)`` from ``1`` and ``first``, in mpmath numbers."""
    p, q = m.mpf(1), first
    for _ in range(n - 1):
        p, q = q, 2 * y * q - p
    return q if n else p


_BINARY = ("__{}__", "__r{}__", "__i{}__")


def _ops(name: str) -> tuple:
    """``__name__``, ``__rname__`` and ``__iname__``."""
    return tuple(f.format(name) for f in _BINARY)


#: The table. Each row: name, scalar forward, one fused gradient per input (none: no gradient), numpy reference,
#: node name, then keywords (see ``Row``). Tests for every row are generated from it (tests/test_table.py).
# fmt: off
ROWS: dict[str, Row] = {r.name: r for r in [
    # unary, differentiable
    Row("neg", neg, (neg_grad,), np.negative, "NegBackward0", ("neg", "negative"), operators=("__neg__",),
        doc="Negate each element: ``-input``.",
        calls=(Call("neg", lambda lib, a: -a, T(3), node="NegBackward0"),)),
    Row("exp", exp, (exp_grad,), np.exp, "ExpBackward0", float_only=True,
        doc="The exponential of each element: ``e ** input``.",
        calls=(Call("exp", lambda lib, a: lib.exp(a), T(3), node="ExpBackward0"),)),
    Row("log", log, (log_grad,), np.log, "LogBackward0", float_only=True, domain=(0.2, 3.0),
        float32_math=True,
        doc="The natural logarithm of each element.",
        calls=(Call("log", lambda lib, a: lib.log(a.abs() + 0.5), T(3), node="LogBackward0"),)),
    Row("sqrt", sqrt, (sqrt_grad,), np.sqrt, "SqrtBackward0", float_only=True, domain=(0.2, 3.0),
        doc="The square root of each element.",
        calls=(Call("sqrt", lambda lib, a: lib.sqrt(a.abs() + 0.5), T(3), node="SqrtBackward0"),)),
    Row("rsqrt", rsqrt, (rsqrt_grad,), lambda x: 1 / np.sqrt(x), "RsqrtBackward0", float_only=True,
        domain=(0.2, 3.0),
        doc="The reciprocal of the square root of each element: ``1 / sqrt(input)``.",
        calls=(Call("rsqrt", lambda lib, a: lib.rsqrt(a.abs() + 0.5), T(3), node="RsqrtBackward0"),)),
    Row("reciprocal", reciprocal, (reciprocal_grad,), np.reciprocal, "ReciprocalBackward0", float_only=True,
        domain=(0.3, 3.0),
        doc="The reciprocal of each element: ``1 / input``."),
    Row("abs", abs_, (abs_grad,), np.abs, "AbsBackward0", ("abs", "absolute"), operators=("__abs__",),
        doc="The absolute value of each element.", no_bool="abs_cpu",
        calls=(Call("abs", lambda lib, a: lib.abs(a), T(3), node="AbsBackward0"),)),
    Row("sin", sin, (sin_grad,), np.sin, "SinBackward0", float_only=True, fix_up=True,
        doc="The sine of each element (in radians).",
        calls=(Call("sin", lambda lib, a: lib.sin(a), T(3), node="SinBackward0"),)),
    Row("cos", cos, (cos_grad,), np.cos, "CosBackward0", float_only=True, fix_up=True,
        doc="The cosine of each element (in radians).",
        calls=(Call("cos", lambda lib, a: a.cos(), T(3), node="CosBackward0"),)),
    Row("tan", tan, (tan_grad,), np.tan, "TanBackward0", float_only=True, domain=(-1.2, 1.2), fix_up=True,
        doc="The tangent of each element (in radians).",
        calls=(Call("tan", lambda lib, a: lib.tan(a * 0.5), T(3), node="TanBackward0"),)),
    Row("tanh", tanh, (tanh_grad,), np.tanh, "TanhBackward0", float_only=True, float32_math=True,
        doc="The hyperbolic tangent of each element.",
        calls=(Call("tanh", lambda lib, a: a.tanh(), T(3), node="TanhBackward0"),)),
    Row("sigmoid", sigmoid, (sigmoid_grad,), _np_sigmoid, "SigmoidBackward0", float_only=True, float32_math=True,
        doc="The logistic sigmoid of each element: ``1 / (1 + exp(-input))``.",
        calls=(Call("sigmoid", lambda lib, a: lib.sigmoid(a), T(3), node="SigmoidBackward0"),)),
    Row("relu", relu, (relu_grad,), lambda x: np.maximum(x, 0), "ReluBackward0",
        doc="Rectified linear unit: ``max(input, 0)`` for each element.",
        calls=(Call("relu", lambda lib, a: lib.relu(a), T(5), node="ReluBackward0"),)),
    Row("clamp", clamp, (clamp_grad,), np.clip, "ClampBackward1", ("clamp", "clip"), params=("lo", "hi"),
        frontend=False,
        doc="Clamp each element into ``[min, max]``.",
        calls=(Call("clamp", lambda lib, a: lib.clamp(a, -0.5, 0.5), T(6), node="ClampBackward1"),
               Call("clamp_min", lambda lib, a: a.clamp(min=0.1), T(6), node="ClampBackward1"),
               Call("clamp_max", lambda lib, a: a.clamp(max=0.1), T(6), node="ClampBackward1"))),
    # --- activations (nn.functional): private names; nn.functional holds the public functions (torch has no
    # torch.leaky_relu...). The in-place forms torch names ...Backward1 use ops.nn_ops's classes of the same rows.
    Row("hardtanh", hardtanh, (hardtanh_grad,), np.clip, "HardtanhBackward0", ("_hardtanh",), methods=(),
        params=("min_val", "max_val"),
        doc="Hard tanh: each element clamped into ``[min_val, max_val]``."),
    Row("hardshrink", hardshrink, (shrink_grad,), lambda x, l: np.where(np.abs(x) <= l, 0.0, x), "HardshrinkBackward0",
        ("_hardshrink",), methods=(), params=("lambd",), inplace=False,
        doc="Hard shrinkage: ``input`` where ``|input| > lambd``, else 0."),
    Row("softshrink", softshrink, (shrink_grad,), lambda x, l: np.where(np.abs(x) <= l, 0.0, x - np.sign(x) * l),
        "SoftshrinkBackward0", ("_softshrink",), methods=(), params=("lambd",), inplace=False,
        doc="Soft shrinkage: ``input`` moved ``lambd`` towards 0, and 0 where ``|input| <= lambd``."),
    Row("threshold", threshold, (threshold_grad,), lambda x, t, v: np.where(x <= t, v, x), "ThresholdBackward0",
        ("_threshold",), methods=(), params=("threshold", "value"), domain=(-1.0, 4.0),
        doc="Threshold: ``value`` where ``input <= threshold``, else ``input``."),
    Row("leaky_relu", leaky_relu, (leaky_relu_grad,), lambda x, s: np.where(x > 0, x, x * s), "LeakyReluBackward0",
        ("_leaky_relu",), methods=(), params=("negative_slope",), float_only=True,
        doc="Leaky ReLU: ``input`` where positive, else ``negative_slope * input``."),
    Row("elu", elu, (elu_grad,), lambda x, a, s, i: np.where(x > 0, x * s, np.expm1(x * i) * a * s), "EluBackward0",
        ("_elu",), methods=(), params=("alpha", "scale", "input_scale"), float_only=True, float32_math=True,
        doc="ELU: ``scale * input`` where positive, else ``scale * alpha * (exp(input_scale * input) - 1)``."),
    Row("gelu", gelu, (gelu_grad,), lambda x: x * 0.5 * (1 + _np_erf(x / np.sqrt(2))), "GeluBackward0", ("_gelu",),
        methods=(), float_only=True, float32_math=True,
        doc="GELU: ``input * Phi(input)``, with ``Phi`` the standard normal CDF (computed through ``erf``)."),
    Row("gelu_tanh", gelu_tanh, (gelu_tanh_grad,),
        lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))), "GeluBackward0",
        ("_gelu_tanh",), methods=(), float_only=True, float32_math=True,
        doc="GELU's tanh approximation: ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))``."),
    Row("silu", silu, (silu_grad,), lambda x: x * _np_sigmoid(x), "SiluBackward0", ("_silu",), methods=(),
        float_only=True, float32_math=True,
        doc="SiLU (swish): ``input * sigmoid(input)``."),
    Row("mish", mish, (mish_grad,), lambda x: x * np.tanh(np.log1p(np.exp(x))), "MishBackward0", ("_mish",),
        methods=(), float_only=True, float32_math=True,
        doc="Mish: ``input * tanh(softplus(input))``."),
    Row("softplus", softplus, (softplus_grad,), _np_softplus, "SoftplusBackward0", ("_softplus",), methods=(),
        params=("beta", "threshold"), float_only=True, float32_math=True,
        doc="Softplus: ``log(1 + exp(beta * input)) / beta``, linear where ``beta * input > threshold``."),
    Row("hardswish", hardswish, (hardswish_grad,), lambda x: x * _np_hardsigmoid(x), "HardswishBackward0",
        ("_hardswish",), methods=(), float_only=True, domain=(-4.0, 4.0), float32_math=True,
        doc="Hard swish: ``input * relu6(input + 3) / 6``."),
    Row("hardsigmoid", hardsigmoid, (hardsigmoid_grad,), _np_hardsigmoid, "HardsigmoidBackward0", ("_hardsigmoid",),
        methods=(), float_only=True, domain=(-4.0, 4.0), float32_math=True,
        doc="Hard sigmoid: ``relu6(input + 3) / 6``."),
    Row("logsigmoid", logsigmoid, (logsigmoid_grad,), lambda x: -np.logaddexp(0, -x), "LogSigmoidBackward0",
        ("_logsigmoid",), methods=(), float_only=True, float32_math=True,
        doc="The logarithm of the sigmoid of each element, computed stably: ``-softplus(-input)``."),
    # zero gradient almost everywhere (torch still records a node)
    Row("sign", sign, (zero_grad,), np.sign, "SignBackward0",
        doc="The sign of each element: -1, 0 or 1."),
    Row("floor", floor, (zero_grad,), np.floor, "FloorBackward0",
        doc="Round each element down to a whole number (the dtype is kept).", no_bool="floor_vml_cpu"),
    Row("ceil", ceil, (zero_grad,), np.ceil, "CeilBackward0",
        doc="Round each element up to a whole number (the dtype is kept).", no_bool="ceil_vml_cpu"),
    Row("round", round_, (zero_grad,), np.round, "RoundBackward0", frontend=False,
        doc="Round each element to the nearest whole number, halves to even.", no_bool="round_vml_cpu"),
    Row("trunc", trunc, (zero_grad,), np.trunc, "TruncBackward0", ("trunc", "fix"),
        doc="Round each element toward zero (drop the fractional part).", no_bool="trunc_vml_cpu"),
    Row("frac", frac, (frac_grad,), lambda x: x - np.trunc(x), "FracBackward0", floating_only=True,
        doc="The fractional part of each element, with its sign: ``input - trunc(input)``."),
    # binary, differentiable
    Row("add", add, (add_grad_x, add_grad_y), np.add, "AddBackward0", operators=_ops("add"), alpha=True,
        doc="Add ``other`` (times ``alpha``) to ``input``, elementwise.",
        calls=(Call("add", lambda lib, a, b: a + b, T(2, 3), T(3), node="AddBackward0"),
               Call("radd", lambda lib, a: 2 + a, T(3), node="AddBackward0"),
               Call("iadd", lambda lib, a: (a * 2).__iadd__(1), T(3), node="AddBackward0"))),
    Row("sub", sub, (sub_grad_x, sub_grad_y), np.subtract, "SubBackward0", ("sub", "subtract"),
        operators=("__sub__", "__isub__"), alpha=True,
        doc="Subtract ``other`` (times ``alpha``) from ``input``, elementwise.",
        calls=(Call("sub", lambda lib, a, b: a - b, T(2, 3), T(2, 1), node="SubBackward0"),)),
    # torch.rsub(x, y) is y - x; Tensor.__rsub__ calls it (see ops/elementwise.py)
    Row("rsub", rsub, (rsub_grad_x, rsub_grad_y), lambda x, y: y - x, {"tt": "RsubBackward0", "ts": "RsubBackward1"},
        methods=(), inplace=False, alpha=True,
        doc="Subtract ``input`` (times ``alpha``) from ``other``: ``other - alpha * input``.", number_operands=(1,),
        calls=(Call("rsub", lambda lib, a: 2 - a, T(3), node="RsubBackward1"),
               Call("rsub_tensor", lambda lib, a, b: lib.rsub(a, b), T(3), T(3), node="RsubBackward0"))),
    Row("mul", mul, (mul_grad_x, mul_grad_y), np.multiply, "MulBackward0", ("mul", "multiply"),
        operators=_ops("mul"),
        doc="Multiply ``input`` by ``other``, elementwise.",
        calls=(Call("mul", lambda lib, a, b: a * b, T(2, 3), T(3), node="MulBackward0"),
               Call("rmul", lambda lib, a: 3 * a, T(3), node="MulBackward0"),
               Call("mul_inplace", lambda lib, a: (a * 2).mul_(a), T(3), node="MulBackward0"))),
    Row("div", div, (div_grad_x, div_grad_y), np.true_divide, "DivBackward0", ("div", "divide", "true_divide"),
        operators=("__truediv__", "__itruediv__"), float_only=True, domain=(0.3, 3.0),
        doc="Divide ``input`` by ``other``, elementwise (true division: integers give floats).",
        calls=(Call("div", lambda lib, a, b: a / (b.abs() + 0.5), T(2, 3), T(3), node="DivBackward0"),
               Call("div_scalar", lambda lib, a: a / 2, T(3), node="DivBackward0"),
               Call("rdiv", lambda lib, a: 2 / (a.abs() + 0.5), T(3), node="MulBackward0"))),
    Row("pow", pow_, (pow_grad_x, pow_grad_y), np.power,
        {"tt": "PowBackward1", "ts": "PowBackward0", "st": "PowBackward2"}, frontend=False, domain=(0.3, 2.0),
        no_bool="pow",
        doc="Raise ``input`` to the power ``exponent``, elementwise.",
        calls=(Call("pow_scalar", lambda lib, a: a**3, T(3), node="PowBackward0"),
               Call("pow_tensor", lambda lib, a, b: (a.abs() + 0.5) ** b, T(3), T(3), node="PowBackward1"),
               Call("rpow", lambda lib, a: 2**a, T(3), node="PowBackward2"),
               Call("pow_fn", lambda lib, a: lib.pow(a.abs() + 0.5, 0.5), T(3), node="PowBackward0"))),
    Row("maximum", maximum, (maximum_grad_x, maximum_grad_y), np.maximum, "MaximumBackward0",
        doc="The larger of ``input`` and ``other`` at each position (NaN wins).", number_operands=(),
        calls=(Call("maximum", lambda lib, a, b: lib.maximum(a, b), T(2, 3), T(3), node="MaximumBackward0"),)),
    Row("minimum", minimum, (minimum_grad_x, minimum_grad_y), np.minimum, "MinimumBackward0",
        doc="The smaller of ``input`` and ``other`` at each position (NaN wins).", number_operands=(),
        calls=(Call("minimum", lambda lib, a, b: lib.minimum(a, b), T(2, 3), T(3), node="MinimumBackward0"),)),
    Row("remainder", remainder, (remainder_grad_x, remainder_grad_y), np.remainder,
        {"tt": "RemainderBackward1", "ts": "RemainderBackward0", "st": "NotImplemented"},
        operators=("__mod__", "__rmod__", "__imod__"), integer_division=True, domain=(0.3, 3.0), fix_up=True,
        doc="Python's ``input % other``, elementwise: the result has the sign of ``other``.", no_bool="remainder_cpu"),
    Row("hypot", hypot, (hypot_grad_x, hypot_grad_y), np.hypot, "HypotBackward0",
        doc="The hypotenuse ``sqrt(input ** 2 + other ** 2)``, elementwise.", number_operands=(), floating_only=True),
    # --- more math
    Row("sinh", sinh, (sinh_grad,), np.sinh, "SinhBackward0", float_only=True,
        doc="The hyperbolic sine of each element."),
    Row("cosh", cosh, (cosh_grad,), np.cosh, "CoshBackward0", float_only=True,
        doc="The hyperbolic cosine of each element."),
    Row("asin", asin, (asin_grad,), _quiet(np.arcsin), "AsinBackward0", ("asin", "arcsin"), float_only=True,
        domain=(-0.9, 0.9),
        doc="The inverse sine of each element (in radians)."),
    Row("acos", acos, (acos_grad,), _quiet(np.arccos), "AcosBackward0", ("acos", "arccos"), float_only=True,
        domain=(-0.9, 0.9),
        doc="The inverse cosine of each element (in radians)."),
    Row("atan", atan, (atan_grad,), np.arctan, "AtanBackward0", ("atan", "arctan"), float_only=True,
        doc="The inverse tangent of each element (in radians)."),
    Row("atan2", atan2, (atan2_grad_y, atan2_grad_x), np.arctan2, "Atan2Backward0", ("atan2", "arctan2"),
        float_only=True, frontend=False, domain=(0.3, 2.0),
        doc="The angle of the point ``(other, input)``: ``atan(input / other)`` in the right quadrant."),
    Row("log1p", log1p, (log1p_grad,), np.log1p, "Log1PBackward0", float_only=True, domain=(-0.5, 2.0),
        float32_math=True,
        doc="``log(1 + input)``, accurate for small inputs."),
    Row("expm1", expm1, (expm1_grad,), np.expm1, "Expm1Backward0", float_only=True, float32_math=True,
        doc="``exp(input) - 1``, accurate for small inputs."),
    Row("log2", log2, (log2_grad,), np.log2, "Log2Backward0", float_only=True, domain=(0.2, 3.0),
        doc="The base-2 logarithm of each element."),
    Row("log10", log10, (log10_grad,), np.log10, "Log10Backward0", float_only=True, domain=(0.2, 3.0),
        doc="The base-10 logarithm of each element."),
    # erf: also gelu's double backward
    Row("erf", erf, (erf_grad,), _np_erf, "ErfBackward0", float_only=True, float32_math=True,
        doc="The Gauss error function of each element."),
    Row("erfc", erfc, (erfc_grad,), lambda x: _np_erf(x, math.erfc), "ErfcBackward0", float_only=True,
        doc="The complementary error function ``1 - erf(input)`` of each element, accurate where erf is near 1."),
    Row("erfinv", erfinv, (erfinv_grad,), _np_erfinv, "ErfinvBackward0", float_only=True, domain=(-0.9, 0.9),
        fix_up=True,
        doc="The inverse error function of each element: ``erfinv(erf(x)) == x``, infinite at -1 and 1."),
    Row("lgamma", lgamma, (lgamma_grad,), _np_lgamma, "LgammaBackward0", float_only=True, domain=(0.2, 4.0),
        doc="The natural logarithm of the absolute value of the gamma function of each element."),
    Row("digamma", digamma, (digamma_grad,), _np_digamma, "DigammaBackward0", float_only=True, domain=(0.2, 4.0),
        doc="The digamma function ``d/dx lgamma(x)`` of each element."),
    Row("polygamma", polygamma, (polygamma_grad,), _np_polygamma, "PolygammaBackward0", params=("n",),
        float_only=True, frontend=False, methods=(), domain=(0.2, 4.0),
        doc="The ``n``-th derivative of the digamma function of each element."),
    # torch.special: differentiable where torch has a formula, the Bessel functions and polynomials without a graph
    Row("i0", i0, (i0_grad,), _mp_reference(lambda m, x: m.besseli(0, x)), "I0Backward0", float_only=True, libm=True,
        doc="The modified Bessel function of the first kind of order 0 of each element."),
    Row("special_i0e", i0e, (i0e_grad,), _mp_reference(lambda m, x: m.besseli(0, x) * m.exp(-abs(x))),
        "SpecialI0EBackward0", ("_special_i0e",), methods=(), float_only=True, libm=True,
        doc="The exponentially scaled modified Bessel function ``exp(-abs(x)) * i0(x)`` of each element."),
    Row("special_i1", i1, (i1_grad,), _mp_reference(lambda m, x: m.besseli(1, x)), "SpecialI1Backward0",
        ("_special_i1",), methods=(), float_only=True, libm=True,
        doc="The modified Bessel function of the first kind of order 1 of each element."),
    Row("special_i1e", i1e, (i1e_grad,), _mp_reference(lambda m, x: m.besseli(1, x) * m.exp(-abs(x))),
        "SpecialI1EBackward0", ("_special_i1e",), methods=(), float_only=True, libm=True,
        doc="The exponentially scaled modified Bessel function ``exp(-abs(x)) * i1(x)`` of each element."),
    Row("special_erfcx", erfcx, (erfcx_grad,), _mp_reference(lambda m, x: m.erfc(x) * m.exp(x * x)),
        "SpecialErfcxBackward0", ("_special_erfcx",), methods=(), float_only=True, libm=True,
        doc="The scaled complementary error function ``exp(x ** 2) * erfc(x)`` of each element."),
    Row("special_log_ndtr", log_ndtr, (log_ndtr_grad,), _mp_reference(lambda m, x: m.log(m.ncdf(x))),
        "SpecialLogNdtrBackward0", ("_special_log_ndtr",), methods=(), float_only=True, libm=True,
        doc="The logarithm of the standard normal CDF of each element, accurate far into the lower tail."),
    Row("special_ndtri", ndtri, (ndtri_grad,), _mp_reference(lambda m, y: m.sqrt(2) * m.erfinv(2 * y - 1)),
        "SpecialNdtriBackward0", ("_special_ndtri",), methods=(), float_only=True, libm=True, domain=(0.1, 0.9),
        doc="The inverse of the standard normal CDF of each element (the normal quantile function)."),
    Row("special_entr", entr, (entr_grad,), _mp_reference(lambda m, x: -x * m.log(x) if x else 0),
        "SpecialEntrBackward0", ("_special_entr",), methods=(), float_only=True, domain=(0.2, 3.0),
        doc="The elementwise entropy ``-x * log(x)`` (0 at 0, -inf for negative x)."),
    Row("special_xlog1py", xlog1py, (xlog1py_grad_x, xlog1py_grad_y),
        _mp_reference(lambda m, x, y: x * m.log1p(y) if x else 0),
        {"tt": "SpecialXlog1PyBackward0", "ts": "SpecialXlog1PyBackward2", "st": "SpecialXlog1PyBackward1"},
        ("_special_xlog1py",), methods=(), float_only=True, domain=(0.3, 3.0),
        doc="``input * log1p(other)``, elementwise, 0 where ``input`` is 0 (NaN where ``other`` is NaN)."),
    Row("special_zeta", zeta, (no_formula_grad, zeta_grad_q), _mp_reference(_mp_zeta),
        {"tt": "SpecialZetaBackward0", "ts": "SpecialZetaBackward2", "st": "SpecialZetaBackward1"},
        ("_special_zeta",), methods=(), float_only=True, domain=(1.5, 4.0),
        no_formula={0: "the derivative for 'zeta' is not implemented."},
        doc="The Hurwitz zeta function ``sum((other + k) ** -input for k >= 0)``, elementwise."),
    Row("igamma", igamma, (no_formula_grad, igamma_grad_x),
        _mp_reference(lambda m, a, x: m.gammainc(a, 0, x, regularized=True)), "IgammaBackward0",
        floating_only=True, libm=True, number_operands=(), domain=(0.5, 3.0),
        no_formula={0: "the derivative for 'igamma: input' is not implemented."},
        doc="The regularized lower incomplete gamma function ``P(input, other)``, elementwise."),
    Row("igammac", igammac, (no_formula_grad, igammac_grad_x),
        _mp_reference(lambda m, a, x: m.gammainc(a, x, m.inf, regularized=True)), "IgammacBackward0",
        floating_only=True, libm=True, number_operands=(), domain=(0.5, 3.0),
        no_formula={0: "the derivative for 'igammac: input' is not implemented."},
        doc="The regularized upper incomplete gamma function ``Q(input, other) = 1 - P(input, other)``, elementwise."),
    Row("special_airy_ai", airy_ai, (), _mp_reference(lambda m, x: m.airyai(x)), None, ("_special_airy_ai",),
        methods=(), float_only=True, libm=True, graph=False, domain=(-2.0, 6.0),
        doc="The Airy function ``Ai`` of each element."),
    # (torch's J and Y rational functions agree with the true values to 1e-8 only beyond 1, as numbagrad's ports
    # of them do: the domains of the reference tests stay below; tests/test_special.py compares with torch's)
    Row("special_bessel_j0", bessel_j0, (), _mp_reference(lambda m, x: m.besselj(0, x)), None,
        ("_special_bessel_j0",), methods=(), float_only=True, libm=True, graph=False, domain=(-1.0, 1.0),
        doc="The Bessel function of the first kind of order 0 of each element."),
    Row("special_bessel_j1", bessel_j1, (), _mp_reference(lambda m, x: m.besselj(1, x)), None,
        ("_special_bessel_j1",), methods=(), float_only=True, libm=True, graph=False, domain=(-1.0, 1.0),
        doc="The Bessel function of the first kind of order 1 of each element."),
    Row("special_bessel_y0", bessel_y0, (), _mp_reference(lambda m, x: m.bessely(0, x)), None,
        ("_special_bessel_y0",), methods=(), float_only=True, libm=True, graph=False, domain=(0.2, 1.0),
        doc="The Bessel function of the second kind of order 0 of each element (NaN for negative input)."),
    Row("special_bessel_y1", bessel_y1, (), _mp_reference(lambda m, x: m.bessely(1, x)), None,
        ("_special_bessel_y1",), methods=(), float_only=True, libm=True, graph=False, domain=(0.2, 1.0),
        doc="The Bessel function of the second kind of order 1 of each element (NaN for negative input)."),
    Row("special_modified_bessel_i0", i0, (), _mp_reference(lambda m, x: m.besseli(0, x)), None,
        ("_special_modified_bessel_i0",), methods=(), float_only=True, libm=True, graph=False,
        doc="The modified Bessel function of the first kind of order 0 of each element."),
    Row("special_modified_bessel_i1", modified_bessel_i1, (), _mp_reference(lambda m, x: m.besseli(1, x)), None,
        ("_special_modified_bessel_i1",), methods=(), float_only=True, libm=True, graph=False,
        doc="The modified Bessel function of the first kind of order 1 of each element."),
    Row("special_modified_bessel_k0", k0, (), _mp_reference(lambda m, x: m.besselk(0, x)), None,
        ("_special_modified_bessel_k0",), methods=(), float_only=True, libm=True, graph=False, domain=(0.2, 4.0),
        doc="The modified Bessel function of the second kind of order 0 of each element (NaN for negative input)."),
    Row("special_modified_bessel_k1", k1, (), _mp_reference(lambda m, x: m.besselk(1, x)), None,
        ("_special_modified_bessel_k1",), methods=(), float_only=True, libm=True, graph=False, domain=(0.2, 4.0),
        doc="The modified Bessel function of the second kind of order 1 of each element (NaN for negative input)."),
    Row("special_scaled_modified_bessel_k0", k0e, (), _mp_reference(lambda m, x: m.besselk(0, x) * m.exp(x)), None,
        ("_special_scaled_modified_bessel_k0",), methods=(), float_only=True, libm=True, graph=False, domain=(0.2, 4.0),
        doc="The exponentially scaled modified Bessel function ``exp(x) * K0(x)`` of each element."),
    Row("special_scaled_modified_bessel_k1", k1e, (), _mp_reference(lambda m, x: m.besselk(1, x) * m.exp(x)), None,
        ("_special_scaled_modified_bessel_k1",), methods=(), float_only=True, libm=True, graph=False, domain=(0.2, 4.0),
        doc="The exponentially scaled modified Bessel function ``exp(x) * K1(x)`` of each element."),
    Row("special_spherical_bessel_j0", spherical_bessel_j0, (), _mp_reference(lambda m, x: m.sin(x) / x), None,
        ("_special_spherical_bessel_j0",), methods=(), float_only=True, libm=True, graph=False, domain=(0.1, 8.0),
        doc="The spherical Bessel function of the first kind of order 0, ``sin(x) / x``, of each element."),
    Row("special_chebyshev_polynomial_t", chebyshev_polynomial_t, (), _mp_polynomial(lambda m, x, n: m.chebyt(n, x)),
        None, ("_special_chebyshev_polynomial_t",), methods=(), float_only=True, libm=True,
        graph=False, domain=(-0.9, 5.0),
        doc="The Chebyshev polynomial of the first kind ``T_n(input)``, ``n`` truncated to an integer."),
    Row("special_chebyshev_polynomial_u", chebyshev_polynomial_u, (), _mp_polynomial(lambda m, x, n: m.chebyu(n, x)),
        None, ("_special_chebyshev_polynomial_u",), methods=(), float_only=True, libm=True,
        graph=False, domain=(-0.9, 5.0),
        doc="The Chebyshev polynomial of the second kind ``U_n(input)``, ``n`` truncated to an integer."),
    Row("special_chebyshev_polynomial_v", chebyshev_polynomial_v, (),
        _mp_polynomial(lambda m, x, n: _mp_recurrence(m, x, 2 * x - 1, n)), None,
        ("_special_chebyshev_polynomial_v",), methods=(), float_only=True, libm=True, graph=False, domain=(-0.9, 5.0),
        doc="The Chebyshev polynomial of the third kind ``V_n(input)``, ``n`` truncated to an integer."),
    Row("special_chebyshev_polynomial_w", chebyshev_polynomial_w, (),
        _mp_polynomial(lambda m, x, n: _mp_recurrence(m, x, 2 * x + 1, n)), None,
        ("_special_chebyshev_polynomial_w",), methods=(), float_only=True, libm=True, graph=False, domain=(-0.9, 5.0),
        doc="The Chebyshev polynomial of the fourth kind ``W_n(input)``, ``n`` truncated to an integer."),
    Row("special_shifted_chebyshev_polynomial_t", shifted_chebyshev_polynomial_t, (),
        _mp_polynomial(lambda m, x, n: m.chebyt(n, 2 * x - 1)), None, ("_special_shifted_chebyshev_polynomial_t",),
        methods=(), float_only=True, libm=True, graph=False, domain=(-0.9, 5.0),
        doc="The shifted Chebyshev polynomial of the first kind ``T_n(2 * input - 1)``."),
    Row("special_shifted_chebyshev_polynomial_u", shifted_chebyshev_polynomial_u, (),
        _mp_polynomial(lambda m, x, n: m.chebyu(n, 2 * x - 1)), None, ("_special_shifted_chebyshev_polynomial_u",),
        methods=(), float_only=True, libm=True, graph=False, domain=(-0.9, 5.0),
        doc="The shifted Chebyshev polynomial of the second kind ``U_n(2 * input - 1)``."),
    Row("special_shifted_chebyshev_polynomial_v", shifted_chebyshev_polynomial_v, (),
        _mp_polynomial(lambda m, x, n: _mp_recurrence(m, 2 * x - 1, 4 * x - 3, n)), None,
        ("_special_shifted_chebyshev_polynomial_v",), methods=(), float_only=True, libm=True,
        graph=False, domain=(-0.9, 5.0),
        doc="The shifted Chebyshev polynomial of the third kind ``V_n(2 * input - 1)``."),
    Row("special_shifted_chebyshev_polynomial_w", shifted_chebyshev_polynomial_w, (),
        _mp_polynomial(lambda m, x, n: _mp_recurrence(m, 2 * x - 1, 4 * x - 1, n)), None,
        ("_special_shifted_chebyshev_polynomial_w",), methods=(), float_only=True, libm=True,
        graph=False, domain=(-0.9, 5.0),
        doc="The shifted Chebyshev polynomial of the fourth kind ``W_n(2 * input - 1)``."),
    Row("special_hermite_polynomial_h", hermite_polynomial_h, (), _mp_polynomial(lambda m, x, n: m.hermite(n, x)),
        None, ("_special_hermite_polynomial_h",), methods=(), float_only=True, libm=True,
        graph=False, domain=(-0.9, 5.0),
        doc="The physicists' Hermite polynomial ``H_n(input)``, ``n`` truncated to an integer."),
    Row("special_hermite_polynomial_he", hermite_polynomial_he, (),
        _mp_polynomial(lambda m, x, n: m.hermite(n, x / m.sqrt(2)) / m.sqrt(2) ** n), None,
        ("_special_hermite_polynomial_he",), methods=(), float_only=True, libm=True, graph=False, domain=(-0.9, 5.0),
        doc="The probabilists' Hermite polynomial ``He_n(input)``, ``n`` truncated to an integer."),
    Row("special_laguerre_polynomial_l", laguerre_polynomial_l, (),
        _mp_polynomial(_mp_laguerre), None, ("_special_laguerre_polynomial_l",), methods=(),
        float_only=True, libm=True, graph=False, domain=(-0.9, 5.0),
        doc="The Laguerre polynomial ``L_n(input)``, ``n`` truncated to an integer."),
    Row("special_legendre_polynomial_p", legendre_polynomial_p, (), _mp_polynomial(lambda m, x, n: m.legendre(n, x)),
        None, ("_special_legendre_polynomial_p",), methods=(), float_only=True, libm=True,
        graph=False, domain=(-0.9, 5.0),
        doc="The Legendre polynomial ``P_n(input)``, ``n`` truncated to an integer."),
    Row("asinh", asinh, (asinh_grad,), np.arcsinh, "AsinhBackward0", ("asinh", "arcsinh"), float_only=True,
        doc="The inverse hyperbolic sine of each element."),
    Row("acosh", acosh, (acosh_grad,), _quiet(np.arccosh), "AcoshBackward0", ("acosh", "arccosh"), float_only=True,
        domain=(1.2, 3.0),
        doc="The inverse hyperbolic cosine of each element (NaN below 1)."),
    Row("atanh", atanh, (atanh_grad,), _quiet(np.arctanh), "AtanhBackward0", ("atanh", "arctanh"), float_only=True,
        domain=(-0.9, 0.9),
        doc="The inverse hyperbolic tangent of each element (infinite at -1 and 1, NaN beyond)."),
    Row("exp2", exp2, (exp2_grad,), np.exp2, "Exp2Backward0", float_only=True,
        doc="``2 ** input``, elementwise."),
    Row("deg2rad", deg2rad, (deg2rad_grad,), np.deg2rad, "Deg2RadBackward0", float_only=True,
        doc="Each element converted from degrees to radians."),
    Row("rad2deg", rad2deg, (rad2deg_grad,), np.rad2deg, "Rad2DegBackward0", float_only=True,
        doc="Each element converted from radians to degrees."),
    Row("sinc", sinc, (sinc_grad,), np.sinc, "SincBackward0", float_only=True, fix_up=True,
        doc="The normalized sinc ``sin(pi * input) / (pi * input)`` of each element (1 at 0)."),
    Row("sgn", sign, (zero_grad,), np.sign, "SgnBackward0",
        doc="The sign of each element, as ``sign`` for real tensors (0 for NaN)."),
    Row("logit", logit, (logit_grad,), _quiet(_np_logit), "LogitBackward0",
        params=("eps",), float_only=True, frontend=False, domain=(0.1, 0.9),
        doc="The log-odds ``log(input / (1 - input))`` of each element, ``input`` clamped to ``[eps, 1 - eps]``."),
    Row("xlogy", xlogy, (xlogy_grad_x, xlogy_grad_y), _quiet(lambda x, y: np.where(x == 0, 0.0, x * np.log(y))),
        {"tt": "XlogyBackward0", "ts": "XlogyBackward2", "st": "XlogyBackward1"}, float_only=True,
        domain=(0.3, 3.0),
        doc="``input * log(other)``, elementwise, 0 where ``input`` is 0 (NaN where ``other`` is NaN)."),
    Row("logaddexp", logaddexp, (logaddexp_grad_x, logaddexp_grad_y), np.logaddexp, "LogaddexpBackward0",
        inplace=False,
        doc="``log(exp(input) + exp(other))``, elementwise, without overflow.", number_operands=(), floating_only=True),
    Row("logaddexp2", logaddexp2, (logaddexp2_grad_x, logaddexp2_grad_y), np.logaddexp2, "Logaddexp2Backward0",
        inplace=False,
        doc="``log2(2 ** input + 2 ** other)``, elementwise, without overflow.", number_operands=(),
        floating_only=True),
    Row("copysign", copysign, (copysign_grad_x, copysign_grad_y), np.copysign,
        {"tt": "CopysignBackward0", "ts": "CopysignBackward1"}, float_only=True, domain=(0.3, 3.0),
        doc="The magnitude of ``input`` with the sign of ``other``, elementwise.", number_operands=(1,)),
    Row("fmax", fmax, (fmax_grad_x, fmax_grad_y), np.fmax, "FmaxBackward0", inplace=False,
        doc="The larger of ``input`` and ``other`` at each position (a NaN loses to a number).", number_operands=()),
    Row("fmin", fmin, (fmin_grad_x, fmin_grad_y), np.fmin, "FminBackward0", inplace=False,
        doc="The smaller of ``input`` and ``other`` at each position (a NaN loses to a number).", number_operands=()),
    Row("fmod", fmod, (fmod_grad_x, fmod_grad_y), np.fmod, {"tt": "FmodBackward1", "ts": "FmodBackward0"},
        integer_division=True, frontend=False, domain=(0.3, 3.0), fix_up=True,
        doc="C's ``fmod(input, other)``, elementwise: the remainder has the sign of ``input``.", no_bool="fmod_cpu"),
    Row("square", square, (square_grad,), np.square, "PowBackward0", frontend=False,
        doc="The square of each element."),  # torch's pow(x, 2)
    Row("lerp", lerp, (lerp_grad_x, lerp_grad_y, lerp_grad_w), lambda x, y, w: x + w * (y - x), "LerpBackward1",
        frontend=False,
        doc="Linear interpolation ``input + weight * (end - input)``, elementwise."),
    Row("lerp_scalar", lerp_scalar, (lerp_scalar_grad_x, lerp_scalar_grad_y), lambda x, y, w: x + w * (y - x),
        "LerpBackward0", names=("_lerp_scalar",), methods=(), inplace=False, params=("weight",),
        doc="Linear interpolation ``input + weight * (end - input)`` with a number ``weight``."),
    Row("nan_to_num", nan_to_num, (nan_to_num_grad,), lambda x, n, p, m: np.nan_to_num(x, nan=n, posinf=p, neginf=m),
        "NanToNumBackward0",
        params=("nan", "posinf", "neginf"), frontend=False,
        doc="Replace NaN, +inf and -inf by ``nan``, ``posinf`` and ``neginf``, elementwise."),
    Row("clamp_min", clamp_min, (clamp_min_grad_x, clamp_min_grad_lo), np.maximum,
        {"tt": "ClampMinBackward1", "ts": "ClampMinBackward0"}, frontend=False,
        doc="Clamp each element from below: ``max(input, min)``."),
    Row("clamp_max", clamp_max, (clamp_max_grad_x, clamp_max_grad_hi), np.minimum,
        {"tt": "ClampMaxBackward1", "ts": "ClampMaxBackward0"}, frontend=False,
        doc="Clamp each element from above: ``min(input, max)``."),
    Row("clamp_tensor", clamp_tensor, (clamp_tensor_grad_x, clamp_tensor_grad_lo, clamp_tensor_grad_hi),
        lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi), "ClampBackward0", names=("_clamp_tensor",), methods=(),
        inplace=False,
        doc="Clamp each element into ``[min, max]`` with tensor bounds (``min > max`` gives ``max``)."),
    Row("round_decimals", round_decimals, (zero_grad_param,), lambda x, d: np.round(x, int(d)), "RoundBackward1",
        names=("_round_decimals",), methods=(), inplace=False, params=("decimals",),
        doc="Round each element to ``decimals`` decimal places, halves to even."),
    Row("addcmul", addcmul, (addcmul_grad_x, addcmul_grad_y, addcmul_grad_z), lambda x, y, z, v: x + v * y * z,
        "AddcmulBackward0", params=("value",), frontend=False,
        doc="``input + value * tensor1 * tensor2``, elementwise."),
    Row("addcdiv", addcdiv, (addcdiv_grad_x, addcdiv_grad_y, addcdiv_grad_z), lambda x, y, z, v: x + v * y / z,
        "AddcdivBackward0", params=("value",), frontend=False, domain=(0.3, 3.0),
        doc="``input + value * tensor1 / tensor2``, elementwise."),
    # no gradient
    Row("floor_divide", floor_divide, (), np.floor_divide, "NotImplemented",
        operators=("__floordiv__", "__rfloordiv__", "__ifloordiv__"), integer_division=True, domain=(0.3, 3.0),
        fix_up=True,
        doc="Divide and round down: ``floor(input / other)``, elementwise.", no_bool="div_floor_cpu"),
    Row("eq", eq, (), np.equal, operators=("__eq__",), out_bool=True,
        doc="``input == other``, elementwise, as a bool tensor.", number_operands=(1,)),
    Row("ne", ne, (), np.not_equal, names=("ne", "not_equal"), operators=("__ne__",), out_bool=True,
        doc="``input != other``, elementwise, as a bool tensor.", number_operands=(1,)),
    Row("lt", lt, (), np.less, names=("lt", "less"), operators=("__lt__",), out_bool=True,
        doc="``input < other``, elementwise, as a bool tensor.", number_operands=(1,)),
    Row("le", le, (), np.less_equal, names=("le", "less_equal"), operators=("__le__",), out_bool=True,
        doc="``input <= other``, elementwise, as a bool tensor.", number_operands=(1,)),
    Row("gt", gt, (), np.greater, names=("gt", "greater"), operators=("__gt__",), out_bool=True,
        doc="``input > other``, elementwise, as a bool tensor.", number_operands=(1,)),
    Row("ge", ge, (), np.greater_equal, names=("ge", "greater_equal"), operators=("__ge__",), out_bool=True,
        doc="``input >= other``, elementwise, as a bool tensor.", number_operands=(1,)),
    Row("isnan", isnan, (), np.isnan, out_bool=True, inplace=False,
        doc="Whether each element is NaN, as a bool tensor."),
    Row("isinf", isinf, (), np.isinf, out_bool=True, inplace=False,
        doc="Whether each element is +inf or -inf, as a bool tensor."),
    Row("isfinite", isfinite, (), np.isfinite, out_bool=True, inplace=False,
        doc="Whether each element is neither NaN nor infinite, as a bool tensor."),
    Row("signbit", signbit, (), np.signbit, out_bool=True, inplace=False,
        doc="Whether each element's sign bit is set (-0.0 included), as a bool tensor."),
    Row("isneginf", isneginf, (), np.isneginf, out_bool=True, inplace=False,
        doc="Whether each element is negative infinity, as a bool tensor."),
    Row("isposinf", isposinf, (), np.isposinf, out_bool=True, inplace=False,
        doc="Whether each element is positive infinity, as a bool tensor."),
    Row("heaviside", heaviside, (), np.heaviside, "NotImplemented",
        doc="The step function: 0 below 0, ``values`` at 0, 1 above, elementwise (no gradient).", number_operands=()),
    Row("logical_not", logical_not, (), np.logical_not, out_bool=True,
        doc="Logical NOT of each element (nonzero is true), as a bool tensor."),
    Row("logical_and", logical_and, (), np.logical_and, out_bool=True,
        doc="Logical AND of ``input`` and ``other`` (nonzero is true), as a bool tensor.", number_operands=()),
    Row("logical_or", logical_or, (), np.logical_or, out_bool=True,
        doc="Logical OR of ``input`` and ``other`` (nonzero is true), as a bool tensor.", number_operands=()),
    Row("logical_xor", logical_xor, (), np.logical_xor, out_bool=True,
        doc="Logical XOR of ``input`` and ``other`` (nonzero is true), as a bool tensor.", number_operands=()),
    Row("bitwise_and", bitwise_and, (), np.bitwise_and, operators=_ops("and"), integral_only=True,
        doc="Bitwise AND of integer or bool tensors."),
    Row("bitwise_or", bitwise_or, (), np.bitwise_or, operators=_ops("or"), integral_only=True,
        doc="Bitwise OR of integer or bool tensors."),
    Row("bitwise_xor", bitwise_xor, (), np.bitwise_xor, operators=_ops("xor"), integral_only=True,
        doc="Bitwise XOR of integer or bool tensors."),
    Row("bitwise_not", bitwise_not, (), np.invert, integral_only=True, frontend=False,
        doc="Bitwise NOT of an integer or bool tensor (logical NOT for bool)."),
]}
# fmt: on

#: A value for each row parameter, valid in every row that takes it: what the generated tests, the CUDA
#: comparisons and the device check pass (one table, so a new row's parameter is named once).
EXAMPLE_PARAMS = {
    "eps": 0.05,
    "lo": -0.5,
    "hi": 0.5,
    "weight": 0.3,
    "nan": 0.0,
    "posinf": 9.0,
    "neginf": -9.0,
    "decimals": 1.0,
    "value": 0.7,
    # activations (nn.functional)
    "min_val": -0.5,
    "max_val": 0.5,
    "negative_slope": 0.1,
    "lambd": 0.5,
    "alpha": 1.3,
    "scale": 1.1,
    "input_scale": 0.9,
    "beta": 1.5,
    "threshold": 2.0,
    "n": 2.0,
}


def example_params(row: Row) -> tuple:
    """The row's parameters as the tests pass them (``EXAMPLE_PARAMS``)."""
    return tuple(EXAMPLE_PARAMS[p] for p in row.params)


# --- complex numbers ------------------------------------------------------------------------------------------
# The rows torch computes for complex tensors, on complex numbers (``cmath``). The backends pick a row's complex
# twin (``COMPLEX_ROWS``) when the compute dtype is complex; its gradients follow torch's convention, the conjugate
# Wirtinger derivative: for a holomorphic f, ``grad = g * conj(f'(z))``. Each twin reads the same operands as the
# real row's gradient (the Function classes decide what to save from the real row). Arithmetic rows whose gradient
# has no derivative factor to conjugate (neg, add, sub, rsub, and the comparisons) are their own twins.
def mul_c_grad_x(g, out, x, y):
    return g * y.conjugate()


def mul_c_grad_y(g, out, x, y):
    return g * x.conjugate()


def div_c_grad_x(g, out, x, y):
    return g / y.conjugate()


def div_c_grad_y(g, out, x, y):
    return -g * (x / (y * y)).conjugate()


def pow_c(x, y):
    return select(y == 0, 1.0 + 0j, x**y)


def pow_c_grad_x(g, out, x, y):
    return select(y == 0, 0j, g * (y * x ** (y - 1)).conjugate())


def pow_c_grad_y(g, out, x, y):
    # zero at a zero base only for a non-negative real exponent (torch's condition); else 0 * log(0): nan
    return select(x == 0 and y.imag == 0 and y.real >= 0, 0j, g * (out * cmath.log(x)).conjugate())


def exp_c(x):
    return cmath.exp(x)


def exp_c_grad(g, out, x):
    return g * out.conjugate()


def log_c(x):
    return cmath.log(x)


def log_c_grad(g, out, x):
    return g / x.conjugate()


def sqrt_c(x):
    return cmath.sqrt(x)


def sqrt_c_grad(g, out, x):
    return g / (2 * out).conjugate()


def rsqrt_c(x):
    return 1 / cmath.sqrt(x)


def rsqrt_c_grad(g, out, x):
    return -0.5 * g * (out * out * out).conjugate()


def reciprocal_c(x):
    return 1 / x


def reciprocal_c_grad(g, out, x):
    return -g * (out * out).conjugate()


def sin_c(x):
    return cmath.sin(x)


def sin_c_grad(g, out, x):
    return g * cmath.cos(x).conjugate()


def cos_c(x):
    return cmath.cos(x)


def cos_c_grad(g, out, x):
    return -g * cmath.sin(x).conjugate()


def tan_c(x):
    return cmath.tan(x)


def tan_c_grad(g, out, x):
    return g * (1 + out * out).conjugate()


def tanh_c(x):
    return cmath.tanh(x)


def tanh_c_grad(g, out, x):
    return g * (1 - out * out).conjugate()


def sigmoid_c(x):
    return 1 / (1 + cmath.exp(-x))


def sigmoid_c_grad(g, out, x):
    return g * (out * (1 - out)).conjugate()


def sinh_c(x):
    return cmath.sinh(x)


def sinh_c_grad(g, out, x):
    return g * cmath.cosh(x).conjugate()


def cosh_c(x):
    return cmath.cosh(x)


def cosh_c_grad(g, out, x):
    return g * cmath.sinh(x).conjugate()


def asin_c(x):
    return cmath.asin(x)


def asin_c_grad(g, out, x):
    return g / cmath.sqrt(1 - x * x).conjugate()


def acos_c(x):
    return cmath.acos(x)


def acos_c_grad(g, out, x):
    return -g / cmath.sqrt(1 - x * x).conjugate()


def atan_c(x):
    return cmath.atan(x)


def atan_c_grad(g, out, x):
    return g / (1 + x * x).conjugate()


def asinh_c(x):
    return cmath.asinh(x)


def asinh_c_grad(g, out, x):
    return g / cmath.sqrt(x * x + 1).conjugate()


def acosh_c(x):
    return cmath.acosh(x)


def acosh_c_grad(g, out, x):
    return g / (cmath.sqrt(x + 1) * cmath.sqrt(x - 1)).conjugate()


def atanh_c(x):
    return cmath.atanh(x)


def atanh_c_grad(g, out, x):
    return g / (1 - x * x).conjugate()


def log1p_c(x):
    return cmath.log(1 + x)


def log1p_c_grad(g, out, x):
    return g / (x + 1).conjugate()


def expm1_c(x):
    return cmath.exp(x) - 1


def expm1_c_grad(g, out, x):
    return g * (out + 1).conjugate()


def log2_c(x):
    return cmath.log(x) / 0.6931471805599453


def log2_c_grad(g, out, x):
    return g / (x * 0.6931471805599453).conjugate()


def log10_c(x):
    return cmath.log10(x)


def log10_c_grad(g, out, x):
    return g / (x * 2.302585092994046).conjugate()


def exp2_c(x):
    return cmath.exp(x * 0.6931471805599453)


def exp2_c_grad(g, out, x):
    return g * (out * 0.6931471805599453).conjugate()


def square_c_grad(g, out, x):
    return g * (2 * x).conjugate()


def sinc_c(x):
    p = math.pi * x
    return select(x == 0, 1.0 + 0j, cmath.sin(p) / p)


def sinc_c_grad(g, out, x):
    p = math.pi * x
    return select(x == 0, 0j, g * ((p * cmath.cos(p) - cmath.sin(p)) / (p * x)).conjugate())


def logaddexp_c(x, y):
    return cmath.log(cmath.exp(x) + cmath.exp(y))


def logaddexp_c_grad_x(g, out, x, y):
    return g / (1 + cmath.exp(y - x)).conjugate()


def logaddexp_c_grad_y(g, out, x, y):
    return g / (1 + cmath.exp(x - y)).conjugate()


def lerp_c_grad_x(g, out, x, y, w):
    return g * (1 - w).conjugate()


def lerp_c_grad_y(g, out, x, y, w):
    return g * w.conjugate()


def lerp_c_grad_w(g, out, x, y, w):
    return g * (y - x).conjugate()


def lerp_scalar_c_grad_x(g, out, x, y, weight):
    return g * (1 - weight).conjugate()


def lerp_scalar_c_grad_y(g, out, x, y, weight):
    return g * weight.conjugate()


def isinf_c(x):
    return (abs(x.real) == math.inf) | (abs(x.imag) == math.inf)


def isfinite_c(x):
    return (abs(x.real) < math.inf) & (abs(x.imag) < math.inf)


def _complex_twin(name: str, forward, grads: tuple = ()) -> Row:
    """The complex twin of row ``name``: its names, flags and params, with complex ``forward`` and ``grads``."""
    row = ROWS[name]
    return dataclasses.replace(row, name=f"{name}_complex", forward=forward, grads=grads or row.grads, reference=None)


#: real row name -> its complex twin (rows torch computes for complex tensors; others refuse complex input)
COMPLEX_ROWS: dict[str, Row] = {
    name: _complex_twin(name, *spec)
    for name, spec in {
        "neg": (neg,), "add": (add,), "sub": (sub,), "rsub": (rsub,),
        "mul": (mul, (mul_c_grad_x, mul_c_grad_y)), "div": (div, (div_c_grad_x, div_c_grad_y)),
        "pow": (pow_c, (pow_c_grad_x, pow_c_grad_y)), "square": (square, (square_c_grad,)),
        "exp": (exp_c, (exp_c_grad,)), "log": (log_c, (log_c_grad,)), "sqrt": (sqrt_c, (sqrt_c_grad,)),
        "rsqrt": (rsqrt_c, (rsqrt_c_grad,)), "reciprocal": (reciprocal_c, (reciprocal_c_grad,)),
        "sin": (sin_c, (sin_c_grad,)), "cos": (cos_c, (cos_c_grad,)), "tan": (tan_c, (tan_c_grad,)),
        "tanh": (tanh_c, (tanh_c_grad,)), "sigmoid": (sigmoid_c, (sigmoid_c_grad,)),
        "sinh": (sinh_c, (sinh_c_grad,)), "cosh": (cosh_c, (cosh_c_grad,)), "asin": (asin_c, (asin_c_grad,)),
        "acos": (acos_c, (acos_c_grad,)), "atan": (atan_c, (atan_c_grad,)), "asinh": (asinh_c, (asinh_c_grad,)),
        "acosh": (acosh_c, (acosh_c_grad,)), "atanh": (atanh_c, (atanh_c_grad,)),
        "log1p": (log1p_c, (log1p_c_grad,)), "expm1": (expm1_c, (expm1_c_grad,)), "log2": (log2_c, (log2_c_grad,)),
        "log10": (log10_c, (log10_c_grad,)), "exp2": (exp2_c, (exp2_c_grad,)),
        "sinc": (sinc_c, (sinc_c_grad,)), "logaddexp": (logaddexp_c, (logaddexp_c_grad_x, logaddexp_c_grad_y)),
        "lerp": (lerp, (lerp_c_grad_x, lerp_c_grad_y, lerp_c_grad_w)),
        "lerp_scalar": (lerp_scalar, (lerp_scalar_c_grad_x, lerp_scalar_c_grad_y)),
        "eq": (eq,), "ne": (ne,), "isnan": (isnan,), "isinf": (isinf_c,), "isfinite": (isfinite_c,),
        "logical_not": (logical_not,), "logical_and": (logical_and,), "logical_or": (logical_or,),
        "logical_xor": (logical_xor,),
    }.items()
}  # fmt: skip


#: real row name -> its twin whose gradient reads the result, not the input: torch's in-place ``leaky_relu_`` and
#: ``elu_`` (``...Backward1`` nodes) save only the result, the tensor they overwrite
RESULT_ROWS: dict[str, Row] = {
    name: dataclasses.replace(ROWS[name], name=f"{name}_from_result", grads=(grad,), reference=None)
    for name, grad in {"leaky_relu": leaky_relu_result_grad, "elu": elu_result_grad}.items()
}
