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
    # one exp of -|x| (never overflows) and a select, so the loop vectorizes; e * s keeps subnormal results
    e = math.exp(-abs(x))
    s = 1 / (1 + e)
    return select(x >= 0, s, e * s)


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
    total += b * w / (s - 1.0) - 0.5 * b
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

    ``doc``: what the op computes, in one line: the first line of its public function's and in-place method's
    docstrings.

    ``no_bool``: the name of torch's kernel that refuses bool input (``"abs_cpu"``), for its NotImplementedError.

    ``number_operands``: the positions of the public function's operands that may be Python numbers (torch's
    ``maximum(t, 1.5)`` is a TypeError: none; ``lt(1.5, t)`` too: only the second); the operators take numbers
    anywhere.
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
    doc: str = ""
    number_operands: tuple = (0, 1)
    no_bool: str = ""
    arity: int = field(init=False)
    out_dtype: object = field(init=False)  # the result's dtype when it is not the computation's (bool), else None

    def __post_init__(self) -> None:
        object.__setattr__(self, "arity", len(inspect.signature(self.forward).parameters) - len(self.params))
        object.__setattr__(self, "out_dtype", np.dtype(np.bool_) if self.out_bool else None)
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
        doc="Negate each element: ``-input``."),
    Row("exp", exp, (exp_grad,), np.exp, "ExpBackward0", float_only=True,
        doc="The exponential of each element: ``e ** input``."),
    Row("log", log, (log_grad,), np.log, "LogBackward0", float_only=True, domain=(0.2, 3.0),
        float32_math=True,
        doc="The natural logarithm of each element."),
    Row("sqrt", sqrt, (sqrt_grad,), np.sqrt, "SqrtBackward0", float_only=True, domain=(0.2, 3.0),
        doc="The square root of each element."),
    Row("rsqrt", rsqrt, (rsqrt_grad,), lambda x: 1 / np.sqrt(x), "RsqrtBackward0", float_only=True,
        domain=(0.2, 3.0),
        doc="The reciprocal of the square root of each element: ``1 / sqrt(input)``."),
    Row("reciprocal", reciprocal, (reciprocal_grad,), np.reciprocal, "ReciprocalBackward0", float_only=True,
        domain=(0.3, 3.0),
        doc="The reciprocal of each element: ``1 / input``."),
    Row("abs", abs_, (abs_grad,), np.abs, "AbsBackward0", ("abs", "absolute"), operators=("__abs__",),
        doc="The absolute value of each element.", no_bool="abs_cpu"),
    Row("sin", sin, (sin_grad,), np.sin, "SinBackward0", float_only=True, fix_up=True,
        doc="The sine of each element (in radians)."),
    Row("cos", cos, (cos_grad,), np.cos, "CosBackward0", float_only=True, fix_up=True,
        doc="The cosine of each element (in radians)."),
    Row("tan", tan, (tan_grad,), np.tan, "TanBackward0", float_only=True, domain=(-1.2, 1.2), fix_up=True,
        doc="The tangent of each element (in radians)."),
    Row("tanh", tanh, (tanh_grad,), np.tanh, "TanhBackward0", float_only=True, float32_math=True,
        doc="The hyperbolic tangent of each element."),
    Row("sigmoid", sigmoid, (sigmoid_grad,), _np_sigmoid, "SigmoidBackward0", float_only=True, float32_math=True,
        doc="The logistic sigmoid of each element: ``1 / (1 + exp(-input))``."),
    Row("relu", relu, (relu_grad,), lambda x: np.maximum(x, 0), "ReluBackward0",
        doc="Rectified linear unit: ``max(input, 0)`` for each element."),
    Row("clamp", clamp, (clamp_grad,), np.clip, "ClampBackward1", ("clamp", "clip"), params=("lo", "hi"),
        frontend=False,
        doc="Clamp each element into ``[min, max]``."),
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
        doc="Add ``other`` (times ``alpha``) to ``input``, elementwise."),
    Row("sub", sub, (sub_grad_x, sub_grad_y), np.subtract, "SubBackward0", ("sub", "subtract"),
        operators=("__sub__", "__isub__"), alpha=True,
        doc="Subtract ``other`` (times ``alpha``) from ``input``, elementwise."),
    # torch.rsub(x, y) is y - x; Tensor.__rsub__ calls it (see ops/elementwise.py)
    Row("rsub", rsub, (rsub_grad_x, rsub_grad_y), lambda x, y: y - x, {"tt": "RsubBackward0", "ts": "RsubBackward1"},
        methods=(), inplace=False, alpha=True,
        doc="Subtract ``input`` (times ``alpha``) from ``other``: ``other - alpha * input``.", number_operands=(1,)),
    Row("mul", mul, (mul_grad_x, mul_grad_y), np.multiply, "MulBackward0", ("mul", "multiply"),
        operators=_ops("mul"),
        doc="Multiply ``input`` by ``other``, elementwise."),
    Row("div", div, (div_grad_x, div_grad_y), np.true_divide, "DivBackward0", ("div", "divide", "true_divide"),
        operators=("__truediv__", "__itruediv__"), float_only=True, domain=(0.3, 3.0),
        doc="Divide ``input`` by ``other``, elementwise (true division: integers give floats)."),
    Row("pow", pow_, (pow_grad_x, pow_grad_y), np.power,
        {"tt": "PowBackward1", "ts": "PowBackward0", "st": "PowBackward2"}, frontend=False, domain=(0.3, 2.0),
        no_bool="pow",
        doc="Raise ``input`` to the power ``exponent``, elementwise."),
    Row("maximum", maximum, (maximum_grad_x, maximum_grad_y), np.maximum, "MaximumBackward0",
        doc="The larger of ``input`` and ``other`` at each position (NaN wins).", number_operands=()),
    Row("minimum", minimum, (minimum_grad_x, minimum_grad_y), np.minimum, "MinimumBackward0",
        doc="The smaller of ``input`` and ``other`` at each position (NaN wins).", number_operands=()),
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
