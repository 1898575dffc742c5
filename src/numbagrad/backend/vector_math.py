"""Vectorizable ``exp``, ``tanh``, ``log``, ``log1p``, ``expm1`` and ``erf`` for the CPU kernels, as source text
copied into generated modules.

``math.exp`` and the others compile to scalar libm calls (this llvmlite has no SVML, and LLVM's vector ``llvm.exp``
is split back into scalar calls), which keeps loops that use them from vectorizing. These versions are plain
arithmetic that LLVM vectorizes:

* ``_vexp``: Cephes' exp in float64 (a Pade form on ``|r| <= ln2/2``, <= 1.5 ulp), scaled by ``2**k`` in two
  factors so subnormals come out right (inf, nan, 0 as libm). A float32 argument is computed in float64 too, so
  the float32 result is rounded once and matches libm's correctly rounded ``expf`` (and torch's printed values:
  a float32 Cephes ``expf``, 1.7x faster, was 1 ulp off at exp(4) and printed 54.5982 where torch prints 54.5981).
* ``_vexp_nonpositive`` (and ``_vexpf_nonpositive`` below): ``exp(-abs(x))``, as logsigmoid calls it,
  without the upper clamp and with one scaling factor instead of two; the same bits as ``_vexp`` for every
  non-positive argument. ``vectorized`` swaps it in for ``math.exp(-abs(``.
* ``_vtanh``: Cephes' tanh in float64 (a rational form below 0.625, exp above; <= 1 ulp).
* ``_vlog``: fdlibm's log in float64 (``x = m * 2**k`` from the bits, ``m`` in (sqrt(2)/2, sqrt(2)], a degree-14
  polynomial in ``s = (m - 1) / (m + 1)``; subnormals scaled first; <= 1 ulp). 1e5 elements: 137 us, libm 641 us.
* ``_vlog2`` and ``_vlog10``: the same reduction and polynomial, ``k + log(m) / ln 2`` and fdlibm's split
  ``k * log10(2)`` (<= 2 ulp; exact at powers of 2 and of 10). 1e5 float32 elements: 130 us, libm 410 and 600 us.
* ``_vsinh`` and ``_vcosh``: Cephes' rational sinh below 1, one ``_vexp`` above (<= 3 ulp; ``exp(|x| / 2)**2 / 2``
  from 709 on, where ``exp`` overflows first). 1e5 float32 elements: 260 and 190 us, libm 2600 and 900 us.
* ``_vatan``, ``_vasin``, ``_vacos`` (Cephes' rational forms and reductions) and ``_vatan2`` (``atan(y / x)``
  moved by pi, C99's values at zeros and infinities): <= 1 ulp. 1e5 float32 elements: 190, 200, 300 and 260 us,
  libm 1410, 1020, 910 and 1460 us.
* ``_vlog1p`` and ``_vexpm1``: Kahan's corrections, ``log(u) * x / (u - 1)`` with ``u = 1 + x``, and
  ``(u - 1) * x / log(u)`` with ``u = exp(x)``: exact where ``u`` keeps nothing of ``x`` (tiny ``x``), <= 2 ulp
  elsewhere.
* ``_verf``: Hart & Cheney's rational forms (their #5667 for ``erfc`` from 0.5 on, times ``exp(-x*x)``), <= 3 ulp.
  1e5 elements: 349 us, libm 1315 us; an eager float32 ``gelu`` took 897 us (torch 69). ``_verfc_fast``: erfc from
  the same forms up to 3 (``FIX_UP``): erfinv of 1e5 float64 elements takes 1210 us
  so, 8200 us through libm (torch 580).
* ``_vexpf``/``_vtanhf``/``_verff``/``_vexpm1f``/``_vlogf``/``_vlog1pf`` (``SINGLE_SOURCE``, which builds on
  ``SOURCE``): float32 arithmetic with fused multiply-adds (Cephes' expf and logf polynomials, <= 1 and 2 ulp;
  erf's Taylor series below 0.5 and the rational form above; expm1's Taylor series below 1 and exp - 1 above;
  log1p by Kahan's correction; <= 2 ulp; 16 lanes where float64 has 8, and no division in exp; erf of 1e5
  elements: 90 us, against 349 us in float64). They are not inlined at Numba IR level: LLVM inlines them, the
  loops still vectorize, and a float32 gelu kernel pair compiles in 1.6 s instead of 3.8 s. A
  float32 swish kernel ran at 45 us per 1e5 elements, against 125 us through the float64 exp and 66 us without the
  FMAs. The float32 twins of the row functions (``single_precision``) serve ``numbagrad.compile``'s fused kernels
  and the eager kernels of the rows marked ``float32_math``: the activations, and log, tanh, log1p, expm1 and erf
  (1e5 float32 elements, 1 thread, float32 math against the float64 path: tanh 61 us against 202, torch 262; log 58
  against 122, torch 107; erf 94 against 299, torch 137; expm1 57 against 342, torch 130; log1p 114 against 204,
  torch 84); the other eager rows keep the correctly rounded
  float64 path (exp among them: see ``_vexp``).

Underflow: where ``exp``'s result rounds to 0 (below -104 in float32, -746 in float64: a softmax's masked
``-inf``, a sigmoid of -200), each function computes ``exp(0)`` in that lane and selects 0. Computed from an
argument clamped there, the scaling steps pass through subnormal numbers, and an Intel core runs each such lane
through a microcode assist: float32 ``exp`` of 1e5 ``-inf`` took 903 us against 120 for zeros, sigmoid of -200
640 us against 48, and a GPT's causal attention forward (half its scores masked) 1.78 ms against 0.5 (Xeon,
AVX-512, one thread). The results are the same bits. Arguments whose results are subnormal still pass through
them, as their values need.

``vectorized(text)`` swaps them in for ``math.exp(`` and the others in copied scalar functions (CPU only: CUDA has
fast versions). ``CPU_VERSIONS`` replaces table functions whole in the CPU kernels: ``root`` (``x ** 0.5`` and
``x ** -0.5`` through ``sqrt``), ``inverse_power`` (``x ** -1`` and ``x ** -2`` by division), ``round_`` (``rint``)
and branch-free ``atanh``, ``acosh`` and ``exp2``. (A float32 ``x ** y`` through ``_vexp(y * _vlog(|x|))`` with
C99's special cases as selects, measured with ``forceinline``: ``x ** 1.5`` of 1e5 elements took 345 us against
504 through ``pow`` (torch 257), but a tensor ** tensor kernel, which tests ``power``'s shortcuts per element, 3186
us against 701.) The
text is part of every generated module that uses it, so a change here changes the module's hash and Numba's cache
never serves a kernel built with the old math.

``SOURCE``'s functions are ``forceinline=True``: Numba types and compiles each once per module, and LLVM must
inline it (``alwaysinline``), so the loops still vectorize. Numba's IR-level ``inline='always'`` typed each body
again at every call site, nested ones too (gelu -> erf -> exp): float64 forward+backward first uses of 30 rows
compiled in 31 s that way and in 18 s with ``forceinline`` (gelu 2.6 s against 1.1 s, elu 3.1 s against 1.2 s;
the test suite's two every-row fused-kernel tests 193 s against 128 s). Left to LLVM's own choice (no attribute),
erf, asinh, expm1, acos and atan2 stayed calls, and their loops ran 3-8x slower.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

import numpy as np

SOURCE = """
import numpy as _np
from llvmlite import ir as _ir
from numba import float64 as _f64
from numba import types as _types
from numba.extending import intrinsic as _intrinsic
from numba.extending import overload as _overload


@_intrinsic
def _pow2(typingctx, k, like):
    # 2.0**k in the float type of ``like`` (float32 or float64), from its exponent bits (k within that type's
    # normal exponents; ``like`` only chooses the type)
    single = like.bitwidth == 32
    bias, shift = (127, 23) if single else (1023, 52)

    def codegen(context, builder, signature, args):
        bits = builder.shl(builder.add(args[0], args[0].type(bias)), args[0].type(shift))
        return builder.bitcast(bits, _ir.FloatType() if single else _ir.DoubleType())

    return like(_types.int32 if single else _types.int64, like), codegen


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vexp_parts(t):
    # (m, k) with exp(t) = m * 2**k, t = k*ln2 + r and |r| <= ln2/2: Cephes' Pade form for m = exp(r)
    k = math.floor(t * 1.4426950408889634 + 0.5)
    r = t - k * 6.93145751953125e-1
    r = r - k * 1.42860682030941723212e-6
    rr = r * r
    p = r * ((1.26177193074810590878e-4 * rr + 3.02994407707441961300e-2) * rr + 9.99999999999999999910e-1)
    q = ((3.00198505138664455042e-6 * rr + 2.52448340349684104192e-3) * rr + 2.27265548208155028766e-1) * rr
    return 1.0 + 2.0 * p / (q + 2.00000000000000000009e0 - p), k


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vexp(x):
    # (below -746, where exp rounds to 0, a lane computes exp(0) and selects 0: see 'Underflow' above)
    x = float(x)
    tiny = x < -746.0
    e, k = _vexp_parts(min(0.0 if tiny else x, 710.0))
    half = k >> 1
    e = e * _pow2(half, e) * _pow2(k - half, e)  # (not x: float() keeps a float32 x a float32 in Numba)
    e = 0.0 if tiny else e
    return x if x != x else e


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vexp_nonpositive(x):
    # _vexp for x <= 0 (or nan), as in exp(-abs(x)): nothing overflows, so one factor 2**(k + 64), normal down to
    # the smallest k, then 2**-64 rounds a subnormal result once, as _vexp's two factors do (same results)
    x = float(x)
    tiny = x < -746.0
    e, k = _vexp_parts(0.0 if tiny else x)
    e = e * _pow2(k + 64, e) * 5.421010862427522e-20
    e = 0.0 if tiny else e
    return x if x != x else e


@njit(cache=CACHE, error_model='numpy', forceinline=True)
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


@_intrinsic
def _bits(typingctx, x):
    # the IEEE bits of a float32 or float64, as an int of its width
    width = x.bitwidth

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], _ir.IntType(width))

    return (_types.int32 if width == 32 else _types.int64)(x), codegen


@_intrinsic
def _from_bits(typingctx, i):
    # the float32 or float64 whose IEEE bits are the int32 or int64 ``i``
    single = i.bitwidth == 32

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], _ir.FloatType() if single else _ir.DoubleType())

    return (_types.float32 if single else _types.float64)(i), codegen


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vlog_parts(x):
    # fdlibm's reduction and polynomial, for x > 0: (k, f, hfsq, sr) with x = m * 2**k, m = 1 + f in
    # (sqrt(2)/2, sqrt(2)], log(m) = f - (hfsq - sr)
    tiny = x < 2.2250738585072014e-308  # subnormal (or 0, negative): scaled by 2**54 into the normal range
    bits = _bits(x * 18014398509481984.0 if tiny else x)
    k = (bits >> 52) - (1077 if tiny else 1023)
    m = _from_bits((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000)  # x = m * 2**k, m in [1, 2)
    big = m > 1.4142135623730951
    m = m * 0.5 if big else m  # m in (sqrt(2)/2, sqrt(2)]
    k = k + 1 if big else k
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (3.999999999940941908e-01 + w * (2.222219843214978396e-01 + w * 1.531383769920937332e-01))
    t2 = z * (6.666666666666735130e-01 + w * (2.857142874366239149e-01 + w * (1.818357216161805012e-01
                                                                               + w * 1.479819860511658591e-01)))
    hfsq = 0.5 * f * f
    return float(k), f, hfsq, s * (hfsq + t1 + t2)


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vlog_edges(x, r):
    # log's values at 0, below 0, inf and nan, in place of r
    r = -math.inf if x == 0 else r
    r = math.nan if x < 0 else r
    return x if (x == math.inf or x != x) else r


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vlog(x):
    x = _f64(x)  # (float(x) keeps a float32 a float32 in Numba)
    dk, f, hfsq, sr = _vlog_parts(x)
    return _vlog_edges(x, dk * 6.93147180369123816490e-01 - ((hfsq - (sr + dk * 1.90821492927058770002e-10)) - f))


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vlog2(x):
    # k + log(m) / ln 2: a power of two exactly k
    x = _f64(x)
    dk, f, hfsq, sr = _vlog_parts(x)
    return _vlog_edges(x, dk + (f - (hfsq - sr)) * 1.4426950408889634)


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vlog10(x):
    # fdlibm's: k * log10(2) in a high part with trailing zeros (exact products) and a low part
    x = _f64(x)
    dk, f, hfsq, sr = _vlog_parts(x)
    z = dk * 3.69423907715893078616e-13 + (f - (hfsq - sr)) * 4.34294481903251816668e-01
    return _vlog_edges(x, z + dk * 3.01029995663611771306e-01)


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vlog1p(x):
    x = _f64(x)
    u = 1.0 + x
    d = u - 1.0
    r = _vlog(u) * (x / d)  # log(u) scaled by the part of x that u kept (Kahan)
    r = x if d == 0 else r  # x below half an ulp of 1 (and +-0)
    return x if x == math.inf else r


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vexpm1(x):
    x = _f64(x)
    u = _vexp(x)
    um1 = u - 1.0
    r = um1 * (x / _vlog(u))  # u - 1 corrected by how far log(u) is from x (Kahan)
    r = x if u == 1.0 else r  # |x| below half an ulp of 1 (and +-0)
    r = -1.0 if um1 == -1.0 else r
    return u if x > 709.0 else r  # (inf)


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vsinh(x):
    # Cephes' sinh: a rational form up to |x| = 1 (<= 1 ulp), (e - 1 / e) / 2 above, and from 709 on
    # exp(|x| / 2)**2 / 2, finite up to 710.47 where exp(|x|) is not; one exp either way
    x = _f64(x)
    a = abs(x)
    z = x * x
    p = ((-7.89474443963537015605e-1 * z - 1.63725857525983828727e2) * z - 1.15614435765005216044e4) * z
    q = ((z - 2.77711081420602794433e2) * z + 3.61578279834431989373e4) * z - 2.11052978884890840399e6
    small = x + x * z * (p - 3.51754964808151394800e5) / q
    e = _vexp(a if a < 709.0 else 0.5 * a)
    r = 0.5 * (e - 1.0 / e) if a < 709.0 else (0.5 * e) * e
    r = -r if x < 0 else r
    return small if a <= 1.0 else r


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vcosh(x):
    # (e + 1 / e) / 2, no cancellation; from 709 on exp(|x| / 2)**2 / 2 (see _vsinh)
    x = _f64(x)
    a = abs(x)
    e = _vexp(a if a < 709.0 else 0.5 * a)
    return 0.5 * (e + 1.0 / e) if a < 709.0 else (0.5 * e) * e


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vatan(x):
    # Cephes' atan: |x| reduced below tan(pi/8) through pi/4 or pi/2 (with the bits of pi they drop), then a
    # rational form (<= 1 ulp)
    x = _f64(x)
    a = abs(x)
    big = a > 2.41421356237309504880
    mid = a > 0.66
    t = -1.0 / a if big else ((a - 1.0) / (a + 1.0) if mid else a)
    y0 = 1.57079632679489661923 if big else (0.78539816339744830962 if mid else 0.0)
    extra = 6.123233995736765886130e-17 if big else (3.061616997868382943065e-17 if mid else 0.0)
    z = t * t
    p = (((-8.750608600031904122785e-1 * z - 1.615753718733365076637e1) * z - 7.500855792314704667340e1) * z
         - 1.228866684490136173410e2) * z - 6.485021904942025371773e1
    q = ((((z + 2.485846490142306297962e1) * z + 1.650270098316988542046e2) * z + 4.328810604912902668951e2) * z
         + 4.853903996359136964868e2) * z + 1.945506571482613964425e2
    r = y0 + ((t * (z * p / q) + t) + extra)
    r = -r if x < 0 else r
    return x if (x == 0 or x != x) else r


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vatan2(y, x):
    # atan(y / x) moved by pi for a negative x, and C99's values where y / x is 0 / 0 or inf / inf, or x is 0
    y = _f64(y)
    x = _f64(x)
    r = _vatan(y / x)
    negative_y = _bits(y) < 0
    pi = -3.14159265358979323846 if negative_y else 3.14159265358979323846
    r = r + pi if x < 0 else r
    half_pi = -1.57079632679489661923 if negative_y else 1.57079632679489661923
    r = half_pi if (x == 0) & (y != 0) else r
    r = (pi if _bits(x) < 0 else y) if (x == 0) & (y == 0) else r  # (+-0 keeps y's sign)
    corner = 0.75 * pi if x < 0 else 0.25 * pi
    r = corner if (abs(x) == math.inf) & (abs(y) == math.inf) else r
    return x + y if (x != x) | (y != y) else r  # (nan)


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vasin(x):
    # Cephes' asin: a rational form up to 0.625, above it asin(1 - zz) through sqrt(2 zz) (<= 1 ulp)
    x = _f64(x)
    a = abs(x)
    zz = 1.0 - a
    p = zz * ((((2.967721961301243206100e-3 * zz - 5.634242780008963776856e-1) * zz + 6.968710824104713396794e0) * zz
               - 2.556901049652824852289e1) * zz + 2.853665548261061424989e1)
    q = (((zz - 2.194779531642920639778e1) * zz + 1.470656354026814941758e2) * zz - 3.838770957603691357202e2) * zz
    s = math.sqrt(zz + zz)
    big = 7.85398163397448309616e-1 - ((s * (p / (q + 3.424398657913078477438e2)) - 6.123233995736765886130e-17)
                                       - (7.85398163397448309616e-1 - s))
    z = a * a
    p = ((((4.253011369004428248960e-3 * z - 6.019598008014123785661e-1) * z + 5.444622390564711410273e0) * z
          - 1.626247967210700244449e1) * z + 1.956261983317594739197e1) * z - 8.198089802484824371615e0
    q = ((((z - 1.474091372988853791896e1) * z + 7.049610280856842141659e1) * z - 1.471791292232726029859e2) * z
         + 1.395105614657485689735e2) * z - 4.918853881490881290097e1
    r = big if a > 0.625 else a * (z * p / q) + a
    r = -r if x < 0 else r
    r = math.nan if a > 1.0 else r
    return x if x == 0 else r


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vacos(x):
    # Cephes' acos: 2 asin(sqrt((1 - x) / 2)) above 0.5, pi - that for -x below -0.5 (exact halvings of 1 -+ x),
    # pi/2 - asin(x) between
    x = _f64(x)
    a = abs(x)
    s = _vasin(math.sqrt(0.5 * (1.0 - a)) if a > 0.5 else x)
    r = 3.14159265358979323846 - 2.0 * s if x < -0.5 else 2.0 * s
    return r if a > 0.5 else (7.85398163397448309616e-1 - s + 6.123233995736765886130e-17) + 7.85398163397448309616e-1


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _verf_near_zero(x):
    # erf(x) for |x| <= 1: x times a rational form in x*x
    z = x * x
    n = ((((((7.547728033418631287834e-3 * z - 2.88805137207594084924010e-1) * z + 1.43383842191748205576712e1) * z
            + 3.80140318123903008244444e1) * z + 3.01782788536507577809226e3) * z + 7.40407142710151470082064e3) * z
         + 8.04373630960840172832162e4)
    d = (((((z + 3.80190713951939403753468e1) * z + 6.58070155459240506326937e2) * z + 6.37960017324428279487120e3) * z
          + 3.42165257924628539769006e4) * z + 8.04373630960840172826266e4)
    return 1.1283791670955125738961589031 * x * n / d


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _verfc_scaled(c):
    # erfc(c) * exp(c*c) for 0.5 <= c <= 6: a rational form in c
    n = (((((((5.641877825507397413087057563e-1 * c + 9.675807882987265400604202961) * c
               + 7.708161730368428609781633646e1) * c + 3.685196154710010637133875746e2) * c
             + 1.143262070703886173606073338e3) * c + 2.320439590251635247384768711e3) * c
           + 2.8980293292167655611275846e3) * c + 1.8263348842295112592168999e3)
    d = ((((((((c + 1.714980943627607849376131193e1) * c + 1.371255960500622202878443578e2) * c
               + 6.617361207107653469211984771e2) * c + 2.094384367789539593790281779e3) * c
             + 4.429612803883682726711528526e3) * c + 6.0895424232724435504633068e3) * c
           + 4.95882756472114071495438422e3) * c + 1.8263348842295112595576438e3)
    return n / d


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _verf(x):
    x = _f64(x)
    a = abs(x)
    small = _verf_near_zero(x)
    c = min(a, 6.0)  # erf is 1.0 in float64 from 5.93 on
    large = 1.0 - _vexp(-c * c) * _verfc_scaled(c)
    large = large if x >= 0 else -large
    large = x if x != x else large  # (nan keeps its sign, as libm)
    return small if a < 0.5 else large


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _verfc_fast(x):
    # erfc(x) from _verf's rational forms up to x = 3, nan above, where the second form's relative error grows
    # (5e-15 at 3, 3e-12 at 4, 7e-11 at 5): the fix-up loop calls libm's there (erfinv beyond |y| = 0.99998)
    a = abs(x)
    tail = _vexp(-a * a) * _verfc_scaled(min(a, 6.0))
    v = 1.0 - _verf_near_zero(x) if a < 0.5 else (tail if x > 0.0 else 2.0 - tail)
    return v if x <= 3.0 else _np.nan


@_intrinsic
def _fma(typingctx, a, b, c):
    # a * b + c rounded once, in float64 (llvm.fma)
    def codegen(context, builder, signature, args):
        return builder.fma(*args)

    return _types.float64(_types.float64, _types.float64, _types.float64), codegen


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vtrig_parts(x):
    # (sin(r), cos(r), q, exact): x = k*pi/2 + r with |r| <= pi/4 (pi/2 in three parts, each step one fma, so r's
    # error is an ulp of the larger partial result), q = k mod 4 as a float; Cephes' sin and cos polynomials.
    # ``exact`` is False where r cannot be trusted to an ulp or two: |x| > 1e5, or r cancelled to below 1e-6.
    x = _f64(x)
    k = _np.rint(x * 0.6366197723675814)
    r = _fma(-k, 1.5707963267948966, x)
    r = _fma(-k, 6.123233995736766e-17, r)
    r = _fma(-k, -1.4973849048591698e-33, r)
    z = r * r
    ps = ((((1.58962301576546568060e-10 * z - 2.50507477628578072866e-8) * z + 2.75573136213857245213e-6) * z
           - 1.98412698295895385996e-4) * z + 8.33333333332211858878e-3) * z - 1.66666666666666307295e-1
    pc = ((((-1.13585365213876817300e-11 * z + 2.08757008419747316778e-9) * z - 2.75573141792967388112e-7) * z
           + 2.48015872888517045348e-5) * z - 1.38888888888730564116e-3) * z + 4.16666666666665929218e-2
    s = r + r * z * ps
    c = 1.0 - 0.5 * z + z * z * pc
    q = k - 4.0 * _np.floor(k * 0.25)
    exact = abs(x) <= 1e5 and (abs(r) >= 1e-6 or k == 0)
    return s, c, q, exact


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vsin(x):
    # sin(x), or nan where _vtrig_parts is not exact (the kernel's fix-up loop then calls libm: FAST_TRIG)
    s, c, q, exact = _vtrig_parts(x)
    v = c if (q == 1.0 or q == 3.0) else s
    v = -v if q >= 2.0 else v
    v = v if exact else _np.nan
    return x if x == 0 else v  # (-0)


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vcos(x):
    # cos(x), or nan where _vtrig_parts is not exact (as _vsin)
    s, c, q, exact = _vtrig_parts(x)
    v = s if (q == 1.0 or q == 3.0) else c
    v = -v if (q == 1.0 or q == 2.0) else v
    return v if exact else _np.nan


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vtan(x):
    # tan(x) = sin(r)/cos(r), or -cos(r)/sin(r) in odd quadrants (<= 3 ulp), or nan where _vtrig_parts is not exact
    s, c, q, exact = _vtrig_parts(x)
    odd = q == 1.0 or q == 3.0
    v = (-c if odd else s) / (s if odd else c)
    v = v if exact else _np.nan
    return x if x == 0 else v  # (-0)


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vfmod_float(x, y):
    # C's fmod: x - q*y with q the truncated quotient, by one fma (exact: the remainder is representable), q one
    # less where the quotient rounded up across an integer (the remainder then has the wrong sign); nan where
    # that is not exact or not defined (|x / y| >= 4e15, y infinite or 0, x infinite, a nan): the fix-up loop's
    # libm then decides
    x = _f64(x)
    y = _f64(y)
    t = x / y
    q = _np.trunc(t)
    r = _fma(-q, y, x)
    q = q - _np.copysign(1.0, q) if (r != 0.0) & ((r < 0.0) != (x < 0.0)) else q
    r = _fma(-q, y, x)
    r = x * 0.0 if r == 0.0 else r  # (a zero has the dividend's sign)
    return r if (abs(t) < 4.0e15) & (abs(y) < _np.inf) else _np.nan


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vmod_float(x, y):
    # Python's % from _vfmod_float: moved by y where the signs differ, a zero with y's sign
    m = _vfmod_float(x, y)
    m = m + y if (m != 0.0) & ((y < 0.0) != (m < 0.0)) else m
    return _np.copysign(0.0, y) if m == 0.0 else m


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vfloordiv_float(x, y):
    # Python's // from _vfmod_float, as CPython and torch compute it
    m = _vfmod_float(x, y)
    d = (_f64(x) - m) / y
    d = d - 1.0 if (m != 0.0) & ((y < 0.0) != (m < 0.0)) else d
    f = _np.floor(d)
    f = f + 1.0 if d - f > 0.5 else f
    return f if d != 0.0 else _np.copysign(0.0, x / y)


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _fmod_int(x, y):
    # C's integer fmod from Python's floor modulo, moved back to x's sign (exact, and right for the most negative
    # integer, whose abs overflows)
    m = x % y
    return m - y if (m != 0) & ((m < 0) != (x < 0)) else m


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _mod_int(x, y):
    return x % y


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _floordiv_int(x, y):
    return x // y


def _float_or_int(stub, for_floats, for_integers):
    # ``stub(x, y)`` runs ``for_floats`` when an operand is a float, else ``for_integers`` (one kernel source serves
    # every dtype of a row)
    @_overload(stub, jit_options={'forceinline': True})
    def typed(x, y):
        if isinstance(x, _types.Float) or isinstance(y, _types.Float):
            return lambda x, y: for_floats(x, y)
        return lambda x, y: for_integers(x, y)


# the fix-up twins of the table's _fmod, _mod (Python's %) and _floordiv (Python's //)
def _vfmod(x, y):
    pass


def _vmod(x, y):
    pass


def _vfloordiv(x, y):
    pass


_float_or_int(_vfmod, _vfmod_float, _fmod_int)
_float_or_int(_vmod, _vmod_float, _mod_int)
_float_or_int(_vfloordiv, _vfloordiv_float, _floordiv_int)


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vasinh(x):
    # glibc's forms over _vlog and _vlog1p (<= 3 ulp): log(|x|) + ln2 above 2**28, log(2|x| + 1/(sqrt(x*x + 1) + |x|))
    # above 2, log1p(|x| + x*x/(1 + sqrt(1 + x*x))) below; the sign of x (-0 and nan as they are)
    x = _f64(x)
    a = abs(x)
    z = a * a
    huge = a > 268435456.0
    large = _vlog(a if huge else 2.0 * a + 1.0 / (_np.sqrt(z + 1.0) + a)) + (0.6931471805599453 if huge else 0.0)
    small = _vlog1p(a + z / (1.0 + _np.sqrt(1.0 + z)))
    v = large if a > 2.0 else small
    return -v if x < 0 else (v if x > 0 else x)


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vacosh(x):
    # glibc's forms over _vlog and _vlog1p (<= 3 ulp): log(x) + ln2 above 2**28, log(2x - 1/(x + sqrt(x*x - 1)))
    # above 2, log1p(t + sqrt(2t + t*t)) with t = x - 1 below; nan below 1 (and for nan)
    x = _f64(x)
    huge = x > 268435456.0
    large = _vlog(x if huge else 2.0 * x - 1.0 / (x + _np.sqrt(x * x - 1.0))) + (0.6931471805599453 if huge else 0.0)
    t = x - 1.0
    small = _vlog1p(t + _np.sqrt(2.0 * t + t * t))
    v = large if x > 2.0 else small
    return v if x >= 1.0 else _np.nan


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vatanh(x):
    # glibc's forms: 0.5 * log1p(2x + 2x*x / (1 - x)) below 0.5, 0.5 * log1p(2x / (1 - x)) above (|x| <= 3 ulp);
    # +-1 give +-inf and |x| > 1 nan through log1p, with no branch
    x = _f64(x)
    a = abs(x)
    t = 2.0 * a
    u = _vlog1p(t + t * a / (1.0 - a) if a < 0.5 else t / (1.0 - a))
    v = 0.5 * u
    v = -v if x < 0 else (v if x > 0 else x)  # (-0, nan)
    return _np.nan if a > 1.0 else v


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vexp2(x):
    # 2**x = 2**k * exp(f * ln2) with k = rint(x) and f = x - k exact (|f * ln2| <= 0.35, so exp's argument carries
    # no error from x's size); 2**k in two factors, so subnormal results come out right. Integers give powers of 2.
    x = _f64(x)
    tiny = x < -1100.0
    c = min(0.0 if tiny else x, 1100.0)
    k = _np.rint(c)
    e = _vexp((c - k) * 0.6931471805599453)
    n = _np.int64(k)
    half = n >> 1
    v = e * _pow2(half, e) * _pow2(n - half, e)
    v = 0.0 if tiny else v
    return x if x != x else v


@njit(cache=CACHE, error_model='numpy', forceinline=True)
def _vhypot(x, y):
    # sqrt(a*a + b*b) with one rounding inside (fma), scaled by a power of 2 where a*a would overflow or lose bits;
    # an infinity wins over a nan, as C99's hypot
    a = max(abs(_f64(x)), abs(_f64(y)))
    b = min(abs(_f64(x)), abs(_f64(y)))
    s = 2.0**-600 if a > 2.0**500 else (2.0**600 if a < 2.0**-500 else 1.0)  # (a*a within normal numbers)
    a2 = a * s
    b2 = b * s
    h = _np.sqrt(_fma(a2, a2, b2 * b2)) / s
    h = _np.inf if (abs(x) == _np.inf or abs(y) == _np.inf) else h
    return h if (x == x and y == y) or h == _np.inf else _np.nan
"""


SINGLE_SOURCE = """
import numpy as _np
from numba import float32 as _f32, int32 as _i32


@_intrinsic
def _fmaf(typingctx, a, b, c):
    # a * b + c rounded once (llvm.fma: one instruction where the CPU has FMA, as this one does)
    def codegen(context, builder, signature, args):
        return builder.fma(*args)

    return _types.float32(_types.float32, _types.float32, _types.float32), codegen


@njit(cache=CACHE, error_model='numpy')
def _vexpf_parts(t):
    # (m, k) with expf(t) = m * 2**k: Cephes' expf polynomial for m = exp(r), r = t - k*ln2
    kf = _np.floor(_fmaf(t, _f32(1.44269504088896341), _f32(0.5)))
    r = _fmaf(kf, _f32(-0.693359375), t)
    r = _fmaf(kf, _f32(2.12194440e-4), r)
    p = _fmaf(_f32(1.9875691500e-4), r, _f32(1.3981999507e-3))
    p = _fmaf(p, r, _f32(8.3334519073e-3))
    p = _fmaf(p, r, _f32(4.1665795894e-2))
    p = _fmaf(p, r, _f32(1.6666665459e-1))
    p = _fmaf(p, r, _f32(5.0000001201e-1))
    return _fmaf(p, r * r, r) + _f32(1.0), _i32(kf)


@njit(cache=CACHE, error_model='numpy')
def _vexpf(x):
    # (below -104, where exp rounds to 0, a lane computes exp(0) and selects 0: see 'Underflow' above)
    x = _f32(x)
    tiny = x < _f32(-104.0)
    p, k = _vexpf_parts(min(_f32(0.0) if tiny else x, _f32(88.8)))
    half = k >> _i32(1)
    e = p * _pow2(half, p) * _pow2(k - half, p)
    e = _f32(0.0) if tiny else e
    return x if x != x else e


@njit(cache=CACHE, error_model='numpy')
def _vexpf_nonpositive(x):
    # _vexpf for x <= 0 (or nan), as in exp(-abs(x)): no upper clamp, and one factor 2**(k + 32), normal down to
    # the smallest k, then 2**-32 rounds a subnormal result once (same results as _vexpf; sigmoid 10% faster)
    x = _f32(x)
    tiny = x < _f32(-104.0)
    p, k = _vexpf_parts(_f32(0.0) if tiny else x)
    e = p * _pow2(k + _i32(32), p) * _f32(2.3283064365386963e-10)
    e = _f32(0.0) if tiny else e
    return x if x != x else e


@njit(cache=CACHE, error_model='numpy')
def _vtanhf(x):
    x = _f32(x)
    a = abs(x)
    z = _vexpf(_f32(2.0) * min(a, _f32(20.0)))
    big = _f32(1.0) - _f32(2.0) / (z + _f32(1.0))
    big = big if x >= 0 else -big
    zz = x * x
    p = _fmaf(_f32(-5.70498872745e-3), zz, _f32(2.06390887954e-2))
    p = _fmaf(p, zz, _f32(-5.37397155531e-2))
    p = _fmaf(p, zz, _f32(1.33314422036e-1))
    p = _fmaf(p, zz, _f32(-3.33332819422e-1)) * zz
    small = _fmaf(x, p, x) if a != 0 else x  # tanh(-0) is -0
    small = small if a < _f32(0.625) else big
    return x if x != x else small


@njit(cache=CACHE, error_model='numpy')
def _hornerf(x, coefficients):
    # coefficients[0] * x**n + ... + coefficients[n] by fused multiply-adds (a constant tuple: the loop unrolls)
    p = coefficients[0]
    for c in coefficients[1:]:
        p = _fmaf(p, x, c)
    return p


# erf(x) / x below 0.5: its Taylor series in x * x, to x**14; from 0.5 on, Hart & Cheney's erfc(x) * exp(x * x)
_ERF_TAYLOR = tuple(_f32(c) for c in (-1.492565035840625e-05, 0.00012055332981789664, -0.0008548327023450852,
                                      0.005223977625442188, -0.026866170645131252, 0.11283791670955126,
                                      -0.37612638903183754, 1.1283791670955126))
_ERFC_P = tuple(_f32(c) for c in (5.641877825507397413087057563e-1, 9.675807882987265400604202961,
                                  7.708161730368428609781633646e1, 3.685196154710010637133875746e2,
                                  1.143262070703886173606073338e3, 2.320439590251635247384768711e3,
                                  2.8980293292167655611275846e3, 1.8263348842295112592168999e3))
_ERFC_Q = tuple(_f32(c) for c in (1.0, 1.714980943627607849376131193e1, 1.371255960500622202878443578e2,
                                  6.617361207107653469211984771e2, 2.094384367789539593790281779e3,
                                  4.429612803883682726711528526e3, 6.0895424232724435504633068e3,
                                  4.95882756472114071495438422e3, 1.8263348842295112595576438e3))
# expm1(x) below 1: its Taylor series, 1/12! down to 1/2! (times x * x, plus x)
_EXPM1_TAYLOR = tuple(_f32(c) for c in (2.08767569878681e-09, 2.505210838544172e-08, 2.755731922398589e-07,
                                        2.7557319223985893e-06, 2.48015873015873e-05, 0.0001984126984126984,
                                        0.001388888888888889, 0.008333333333333333, 0.041666666666666664,
                                        0.16666666666666666, 0.5))
# log(1 + f) - f + f * f / 2, over f * f * f, for f in (sqrt(2)/2 - 1, sqrt(2) - 1]: Cephes' logf polynomial
_LOG_P = tuple(_f32(c) for c in (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
                                 1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
                                 3.3333331174e-1))


@njit(cache=CACHE, error_model='numpy')
def _verff(x):
    x = _f32(x)
    a = abs(x)
    small = x * _hornerf(a * a, _ERF_TAYLOR)
    c = min(a, _f32(4.5))  # erf is 1.0 in float32 from 3.92 on
    large = _f32(1.0) - _vexpf(-c * c) * _hornerf(c, _ERFC_P) / _hornerf(c, _ERFC_Q)
    large = large if x >= 0 else -large
    large = x if x != x else large
    return small if a < _f32(0.5) else large


@njit(cache=CACHE, error_model='numpy')
def _vexpm1f(x):
    x = _f32(x)
    small = _fmaf(x * x, _hornerf(x, _EXPM1_TAYLOR), x)
    small = x if x == 0 else small  # (-0)
    large = _vexpf(x) - _f32(1.0)  # from |x| = 1 on, exp's rounding is at most about an ulp of the difference
    return small if abs(x) < _f32(1.0) else large


@njit(cache=CACHE, error_model='numpy')
def _vlogf(x):
    x = _f32(x)
    tiny = x < _f32(1.1754943508222875e-38)  # subnormal (or 0, negative): scaled by 2**25 into the normal range
    bits = _bits(x * _f32(33554432.0) if tiny else x)
    k = (bits >> _i32(23)) - (_i32(152) if tiny else _i32(127))
    m = _from_bits(_i32((bits & 0x007FFFFF) | 0x3F800000))  # x = m * 2**k, m in [1, 2) (int ops widen to int64)
    big = m > _f32(1.41421356)
    m = m * _f32(0.5) if big else m  # m in (sqrt(2)/2, sqrt(2)]
    k = k + _i32(1) if big else k
    f = m - _f32(1.0)
    z = f * f
    y = f * z * _hornerf(f, _LOG_P)  # Cephes' logf polynomial
    e = _f32(k)
    y = _fmaf(e, _f32(-2.12194440e-4), y)
    y = _fmaf(z, _f32(-0.5), y)
    r = _fmaf(e, _f32(0.693359375), f + y)
    r = -_np.inf if x == 0 else r
    r = _np.nan if x < 0 else r
    return x if (x == _np.inf or x != x) else r


@njit(cache=CACHE, error_model='numpy')
def _vlog1pf(x):
    x = _f32(x)
    u = _f32(1.0) + x
    d = u - _f32(1.0)
    r = _vlogf(u) * (x / d)  # log(u) scaled by the part of x that u kept (Kahan)
    r = x if d == 0 else r  # x below half an ulp of 1 (and +-0)
    return x if x == _np.inf else r
"""


def single_precision(text: str) -> str:
    """The float32 twins of copied scalar functions (``def f`` becomes ``def f_f32``): every numeric literal
    becomes a float32 constant (except an exponent after ``**``, which Numba unrolls as an integer), and
    ``math.exp``/``math.tanh`` become ``SINGLE_SOURCE``'s float32 versions, so the arithmetic stays in float32
    (a literal ``1`` or the float64 exp would promote it). Results are within an ulp or two of the float64 path:
    ``numbagrad.compile`` uses them, as torch.compile's kernels differ from eager by rounding."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    edits = []  # (start, end, replacement)
    previous, after_def = None, False
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        start = starts[tok.start[0] - 1] + tok.start[1]
        end = starts[tok.end[0] - 1] + tok.end[1]
        if tok.type == tokenize.NUMBER and previous != "**" and _fits_single(tok.string):
            edits.append((start, end, f"_f32({tok.string})"))
        elif tok.type == tokenize.NAME and after_def:
            edits.append((start, end, f"{tok.string}_f32"))
        after_def = tok.type == tokenize.NAME and tok.string == "def"
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            previous = tok.string
    for start, end, new in reversed(edits):
        text = text[:start] + new + text[end:]
    for name, single in SINGLE_FUNCTIONS.items():
        text = text.replace(f"math.{name}(", f"{single}(")
    return vectorized(text)  # (any other libm function: its float64 version, where SOURCE has one)


def _fits_single(literal: str) -> bool:
    """Whether a numeric literal keeps its meaning as a float32: finite, and not a nonzero value that rounds to
    0 (an epsilon like ``1e-300`` stays a float64 literal, so the expression it guards keeps its guard)."""
    try:
        value = complex(literal.replace("_", "")) if literal[-1] in "jJ" else float(literal.replace("_", ""))
    except ValueError:  # hex, octal or binary integers
        value = float(int(literal.replace("_", ""), 0))
    if isinstance(value, complex):
        return False
    with np.errstate(over="ignore", under="ignore"):
        single = np.float32(value)
    return bool(np.isfinite(single)) and (value == 0 or single != 0)


#: The CPU kernels' ``scalar_math.root`` (``x ** 0.5`` and ``x ** -0.5``), copied in its place: typed per operand,
#: a float exponent takes ``sqrt`` itself, as torch does (``1 / s`` of a float32 ``s`` is divided in float64 and
#: rounded once on store: float32's own ``1 / sqrtf``). 1e5 float32 elements: 25 us, against 780 us through
#: ``pow``. An integer exponent is never 0.5, and its ``x ** y`` keeps the integer type ``power`` returns.
ROOT = """
from numba.extending import overload as _overload
from numba import types as _types


def root(x, y):
    pass


@_overload(root, jit_options={'forceinline': True})
def _typed_root(x, y):
    if isinstance(y, _types.Float):
        def by_sqrt(x, y):
            s = math.sqrt(x)
            return s if y > 0 else 1.0 / s

        return by_sqrt
    return lambda x, y: x**y
"""

#: The CPU kernels' ``scalar_math.inverse_power`` (``x ** -1`` and ``x ** -2``): for floats torch's ``1 / x`` and
#: ``1 / (x * x)``, divided in the operand's own type. ``x ** -1`` of 1e5 float32 elements: 15 us, against 470 us
#: through ``pow`` (torch 13). An integer exponent keeps ``x ** y``.
INVERSE_POWER = """
from numba.extending import overload as _overload
from numba import types as _types


def inverse_power(x, y):
    pass


@_overload(inverse_power, jit_options={'forceinline': True})
def _typed_inverse_power(x, y):
    if isinstance(x, _types.Float) and x.bitwidth == 32:
        return lambda x, y: _np.float32(1.0) / x if y == -1 else _np.float32(1.0) / (x * x)
    if isinstance(x, _types.Float):
        return lambda x, y: 1.0 / x if y == -1 else 1.0 / (x * x)
    return lambda x, y: x**y
"""

#: The CPU kernels' ``scalar_math.round_``: numpy's ``rint`` for floats (round half to even is the default
#: rounding mode; one instruction, vectorized: 1e5 float32 elements took 39 us through floors and selects, torch
#: 11), and an integer as it is.
ROUND_HALF_EVEN = """
from numba.extending import overload as _overload
from numba import types as _types


def round_(x):
    pass


@_overload(round_, jit_options={'forceinline': True})
def _typed_round(x):
    if isinstance(x, _types.Float):
        return lambda x: _np.rint(x)
    return lambda x: x
"""

#: The CPU kernels' ``atanh``, ``acosh`` and ``exp2``: branch-free, so their loops vectorize (the table's own atanh
#: and acosh guard libm's against arguments where Python's raises under the CUDA simulator; its exp2 is ``2.0**x``,
#: libm's pow).
ATANH = """
@njit(cache=CACHE, error_model='numpy', inline='always')
def atanh(x):
    return _vatanh(x)
"""
ACOSH = """
@njit(cache=CACHE, error_model='numpy', inline='always')
def acosh(x):
    return _vacosh(x)
"""
EXP2 = """
@njit(cache=CACHE, error_model='numpy', inline='always')
def exp2(x):
    return _vexp2(x)
"""

#: Copied scalar functions that the CPU kernels replace with a version of their own (``functions_source``).
CPU_VERSIONS = {
    "root": ROOT,
    "inverse_power": INVERSE_POWER,
    "round_": ROUND_HALF_EVEN,
    "atanh": ATANH,
    "acosh": ACOSH,
    "exp2": EXP2,
}


#: libm functions with a vectorizable float64 version in ``SOURCE``: what ``vectorized`` swaps in (``exp(-abs(``
#: first: its argument is never positive, and ``_vexp_nonpositive`` skips what only positive arguments need).
#: ``floor``/``ceil``/``trunc`` become numpy's, which stay floats (Numba's ``math.floor`` returns an int64, and the
#: conversions kept ``floor`` of 1e5 float32 elements at 34 us, against 11 us for torch).
VECTOR_FUNCTIONS = {"exp(-abs": "_vexp_nonpositive(-abs", "exp": "_vexp", "tanh": "_vtanh", "log2": "_vlog2",
                    "log10": "_vlog10", "log": "_vlog", "sinh": "_vsinh", "cosh": "_vcosh", "atan2": "_vatan2",
                    "atan": "_vatan", "asin": "_vasin", "acos": "_vacos",
                    "log1p": "_vlog1p", "expm1": "_vexpm1", "erf": "_verf", "hypot": "_vhypot", "asinh": "_vasinh",
                    "floor": "_np.floor",
                    "ceil": "_np.ceil", "trunc": "_np.trunc"}  # fmt: skip


#: GELU's float32 twins, written here instead of derived by ``single_precision``: the standard normal tail
#: ``0.5 * erfc(|x| / sqrt(2))`` from Abramowitz & Stegun's 7.1.26 (``t * P(t) * exp(-z * z)``, ``t = 1 / (1 +
#: 0.3275911 * |z|)``, within 1.5e-7 of ``erfc``), so ``1 + erf`` never cancels for negative ``x`` and the gradient
#: shares the forward's one ``exp``. Measured against the exact GELU at 4e5 float32 points in [-6, 6]: within
#: 4.2e-7 (torch's own float32 GELU: 1.2e-6), relative 1.7e-4 where ``|gelu| > 1e-3`` (torch: 9.9e-4). 393216
#: elements (the char GPT's MLP), 1 thread: forward 210 us, backward 242 us, against 370 and 505 us through
#: ``_verff`` and a second ``exp`` (torch: 177 us forward).
GELU_F32 = """
def gelu_f32(x):
    z = x * _f32(0.7071067811865476)
    t = _f32(1.0) / _fmaf(_f32(0.3275911), abs(z), _f32(1.0))
    p = _fmaf(_fmaf(_fmaf(_fmaf(_f32(1.061405429), t, _f32(-1.453152027)), t, _f32(1.421413741)), t,
                    _f32(-0.284496736)), t, _f32(0.254829592))
    tail = p * t * _vexpf_nonpositive(-(z * z))  # erfc(|z|)
    return x * _f32(0.5) * (_f32(2.0) - tail if x >= 0 else tail)
"""

GELU_GRAD_F32 = """
def gelu_grad_f32(g, out, x):
    z = x * _f32(0.7071067811865476)
    t = _f32(1.0) / _fmaf(_f32(0.3275911), abs(z), _f32(1.0))
    p = _fmaf(_fmaf(_fmaf(_fmaf(_f32(1.061405429), t, _f32(-1.453152027)), t, _f32(1.421413741)), t,
                    _f32(-0.284496736)), t, _f32(0.254829592))
    e = _vexpf_nonpositive(-(z * z))
    tail = p * t * e  # erfc(|z|)
    cdf = _f32(0.5) * (_f32(2.0) - tail if x >= 0 else tail)
    return g * (cdf + x * (e * _f32(0.3989422804014327)))
"""

#: Table functions whose float32 twin is written by hand (above), by the name of the table function.
SINGLE_VERSIONS = {"gelu": GELU_F32, "gelu_grad": GELU_GRAD_F32}


#: libm functions with a float32 version in ``SINGLE_SOURCE``: what ``single_precision`` swaps in.
SINGLE_FUNCTIONS = {"exp(-abs": "_vexpf_nonpositive(-abs", "exp": "_vexpf", "tanh": "_vtanhf", "erf": "_verff",
                    "expm1": "_vexpm1f", "log": "_vlogf", "log1p": "_vlog1pf"}  # fmt: skip


#: Calls with a version in ``SOURCE`` that gives nan where it cannot promise its result (sin, cos and tan of
#: |x| > 1e5 or next to a multiple of pi/2; fmod, Python's % and // of a float quotient beyond 4e15, or of an
#: infinity or a zero divisor; erfc above 3): ``fix_up_twin`` swaps them in, and only kernels that compute every
#: nan result again with the exact function call the twins (``codegen``'s fix-up loop).
FIX_UP = {"math.sin(": "_vsin(", "math.cos(": "_vcos(", "math.tan(": "_vtan(", "_fmod(": "_vfmod(",
          "_mod(": "_vmod(", "_floordiv(": "_vfloordiv(", "math.erfc(": "_verfc_fast("}  # fmt: skip


def fix_up_twin(text: str) -> str:
    """The fix-up twins of copied scalar functions (``def f`` becomes ``def f_fast``), calling ``FIX_UP``'s fast
    versions instead of the exact ones. A twin gives nan where they do; the row's functions must carry that nan
    to their result (no comparison of a sine may decide anything), so the fix-up loop can find it."""
    text = re.sub(r"^def (\w+)\(", r"def \1_fast(", text, flags=re.MULTILINE)
    for call, fast in FIX_UP.items():
        text = re.sub(r"(?<![\w.])" + re.escape(call), fast, text)  # (whole names: _mod( is not _vmod('s tail)
    return vectorized(text)


# --- what a generated module keeps of SOURCE and SINGLE_SOURCE ------------------------------------------------
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def _statements(block: str) -> list:
    """``block``'s top-level statements as (text, names it defines, names it reads, is an import). A call such as
    ``_float_or_int(_vfmod, ...)`` defines its first argument: it registers what ``_vfmod`` does."""
    lines = block.splitlines(keepends=True)
    out = []
    for node in ast.parse(block).body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        text = "".join(lines[first - 1 : node.end_lineno]).rstrip("\n")
        reads = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | set(_IDENTIFIER.findall(text))
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defines = {node.name}
        elif isinstance(node, ast.Assign):
            defines = {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and node.value.args:
            defines = {a.id for a in node.value.args[:1] if isinstance(a, ast.Name)}
        else:
            defines = set()
        out.append((text, defines, reads - defines, isinstance(node, (ast.Import, ast.ImportFrom))))
    return out


_BLOCKS: list = []  # (block text, its statements), parsed on first use


def used_only(text: str) -> str:
    """``text`` (a generated module) with each copy of ``SOURCE`` and ``SINGLE_SOURCE`` in it cut down to its imports
    and the functions the rest of the module calls, directly or through each other. Each cached Numba function
    costs a file-system lookup when its module runs: a module with all of them took 20-50 ms to load from a warm
    cache, and a program loads one per kernel."""
    if not _BLOCKS:
        _BLOCKS.extend((block.strip("\n"), _statements(block.strip("\n"))) for block in (SOURCE, SINGLE_SOURCE))
    present = [(block, statements) for block, statements in _BLOCKS if block in text]
    if not present:
        return text
    rest = text
    for block, _ in present:
        rest = rest.replace(block, "")
    needed = set(_IDENTIFIER.findall(rest))
    kept: set = set()
    changed = True
    while changed:  # the closure over the blocks' own calls (SINGLE_SOURCE's use SOURCE's)
        changed = False
        for _, statements in present:
            for k, (_, defines, reads, is_import) in enumerate(statements):
                if (k, id(statements)) not in kept and (is_import or defines & needed):
                    kept.add((k, id(statements)))
                    needed |= reads
                    changed = True
    for block, statements in present:
        lines = [t for k, (t, *_) in enumerate(statements) if (k, id(statements)) in kept]
        text = text.replace(block, "\n\n\n".join(lines))
    return text


def vectorized(text: str) -> str:
    """``text`` (copied scalar functions) calling ``SOURCE``'s versions instead of ``math.exp``, ``math.tanh``,
    ``math.log`` (and ``log2``, ``log10``, ``log1p``), ``math.expm1``, ``math.erf``, ``math.sinh``, ``math.cosh``,
    ``math.atan``, ``math.atan2``, ``math.asin`` and ``math.acos`` (``VECTOR_FUNCTIONS``)."""
    for name, vector in VECTOR_FUNCTIONS.items():
        text = re.sub(rf"(?<![\w.])math\.{re.escape(name)}\(", f"{vector}(", text)  # (not ``cmath.exp(``)
    return text
