"""Vectorizable ``exp`` and ``tanh`` for the CPU kernels, as source text copied into generated modules.

``math.exp`` and ``math.tanh`` compile to scalar libm calls (this llvmlite has no SVML, and LLVM's vector
``llvm.exp`` is split back into scalar calls), which keeps loops that use them from vectorizing. These versions are
plain arithmetic that LLVM vectorizes:

* ``_vexp``: Cephes' exp, scaled by ``2**k`` in two factors so subnormals come out right (inf, nan, 0 as libm).
  float64 (and integer) arguments: a Pade form on ``|r| <= ln2/2``, <= 1.5 ulp. float32 arguments: Cephes' expf,
  computed in float32 (8 lanes instead of 4; constants are ``np.float32`` globals, which Numba freezes as float32,
  since a literal would be float64), <= 2 ulp of float32. An ``overload`` picks one by the argument's type.
* ``_vtanh``: Cephes' tanh in float64 (a rational form below 0.625, exp above; <= 1 ulp).

``vectorized(text)`` swaps them in for ``math.exp(``/``math.tanh(`` in copied scalar functions (CPU only: CUDA
has a fast exp). The text is part of every generated module that uses it, so a change here changes the module's
hash and Numba's cache never serves a kernel built with the old math.
"""

from __future__ import annotations

SOURCE = """
import numpy as _np
from llvmlite import ir as _ir
from numba import types as _types
from numba.extending import intrinsic as _intrinsic, overload as _overload


@_intrinsic
def _pow2(typingctx, k, like):
    # 2.0**k as a float of like's type, from its exponent bits (k within that type's normal exponents)
    width, bias, shift = (32, 127, 23) if like == _types.float32 else (64, 1023, 52)

    def codegen(context, builder, signature, args):
        bits = builder.trunc(args[0], _ir.IntType(32)) if width == 32 else args[0]
        bits = builder.shl(builder.add(bits, bits.type(bias)), bits.type(shift))
        return builder.bitcast(bits, _ir.FloatType() if width == 32 else _ir.DoubleType())

    return like(_types.int64, like), codegen


def _exp64(x):
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
    e = e * _pow2(half, x) * _pow2(k - half, x)
    return x if x != x else e


_F32 = [_np.float32(c) for c in (-104.0, 89.0, 1.44269504088896341, 0.5, 0.693359375, -2.12194440e-4, 1.0,
                                 1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                                 1.6666665459e-1, 5.0000001201e-1)]
_LO32, _HI32, _LOG2E32, _HALF32, _C1_32, _C2_32, _ONE32, _P0, _P1, _P2, _P3, _P4, _P5 = _F32


def _exp32(x):
    t = min(max(x, _LO32), _HI32)
    k = _np.floor(t * _LOG2E32 + _HALF32)
    r = t - k * _C1_32 - k * _C2_32
    p = (((((_P0 * r + _P1) * r + _P2) * r + _P3) * r + _P4) * r + _P5) * (r * r) + r + _ONE32
    ki = int(k)
    half = ki >> 1
    e = p * _pow2(half, x) * _pow2(ki - half, x)
    return x if x != x else e


def _vexp(x):
    return math.exp(x)


@_overload(_vexp)
def _vexp_typed(x):
    return _exp32 if x == _types.float32 else _exp64


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
