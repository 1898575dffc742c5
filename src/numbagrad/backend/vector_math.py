"""Vectorizable ``exp`` and ``tanh`` for the CPU kernels, as source text copied into generated modules.

``math.exp`` and ``math.tanh`` compile to scalar libm calls (this llvmlite has no SVML, and LLVM's vector
``llvm.exp`` is split back into scalar calls), which keeps loops that use them from vectorizing. These versions are
plain arithmetic that LLVM vectorizes:

* ``_vexp``: Cephes' exp in float64 (a Pade form on ``|r| <= ln2/2``, <= 1.5 ulp), scaled by ``2**k`` in two
  factors so subnormals come out right (inf, nan, 0 as libm). A float32 argument is computed in float64 too, so
  the float32 result is rounded once and matches libm's correctly rounded ``expf`` (and torch's printed values:
  a float32 Cephes ``expf``, 1.7x faster, was 1 ulp off at exp(4) and printed 54.5982 where torch prints 54.5981).
* ``_vtanh``: Cephes' tanh in float64 (a rational form below 0.625, exp above; <= 1 ulp).

``vectorized(text)`` swaps them in for ``math.exp(``/``math.tanh(`` in copied scalar functions (CPU only: CUDA
has a fast exp). The text is part of every generated module that uses it, so a change here changes the module's
hash and Numba's cache never serves a kernel built with the old math.
"""

from __future__ import annotations

SOURCE = """
from llvmlite import ir as _ir
from numba import types as _types
from numba.extending import intrinsic as _intrinsic


@_intrinsic
def _pow2(typingctx, k):
    # 2.0**k from its exponent bits (k within float64's normal exponents)
    def codegen(context, builder, signature, args):
        bits = builder.shl(builder.add(args[0], args[0].type(1023)), args[0].type(52))
        return builder.bitcast(bits, _ir.DoubleType())

    return _types.float64(_types.int64), codegen


@njit(cache=CACHE, error_model='numpy', inline='always')
def _vexp(x):
    x = float(x)
    t = min(max(x, -746.0), 710.0)
    k = math.floor(t * 1.4426950408889634 + 0.5)
    r = t - k * 6.93145751953125e-1
    r = r - k * 1.42860682030941723212e-6
    rr = r * r
    p = r * ((1.26177193074810590878e-4 * rr + 3.02994407707441961300e-2) * rr + 9.99999999999999999910e-1)
    q = ((3.00198505138664455042e-6 * rr + 2.52448340349684104192e-3) * rr + 2.27265548208155028766e-1) * rr
    e = 1.0 + 2.0 * p / (q + 2.00000000000000000009e0 - p)
    half = k >> 1
    e = e * _pow2(half) * _pow2(k - half)
    return x if x != x else e


@njit(cache=CACHE, error_model='numpy', inline='always')
def _vtanh(x):
    x = float(x)
    a = abs(x)
    z = _vexp(2.0 * min(a, 40.0))
    big = 1.0 - 2.0 / (z + 1.0)
    big = big if x >= 0 else -big
    zz = x * x
    p = (-9.64399179425052238628e-1 * zz - 9.92877231001918586564e1) * zz - 1.61468768441708447952e3
    q = ((zz + 1.12811678491632931402e2) * zz + 2.23548839060100448583e3) * zz + 4.84406305325125486048e3
    small = x + x * zz * p / q if a != 0 else x  # tanh(-0) is -0
    return small if a < 0.625 else big
"""


def vectorized(text: str) -> str:
    """``text`` (copied scalar functions) calling ``_vexp``/``_vtanh`` instead of ``math.exp``/``math.tanh``."""
    return text.replace("math.exp(", "_vexp(").replace("math.tanh(", "_vtanh(")
