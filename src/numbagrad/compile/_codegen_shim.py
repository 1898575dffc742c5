"""The compiler's access to the one kernel generator, ``backend.codegen`` (and a stand-in until it is there).

Three functions, the generator's API:

* ``loop_source(target, name, args, body, n)``: one kernel ``def name(args)`` running ``body`` (which may be
  several lines and uses the index ``i``) for ``i`` in ``range(n)``: ``"serial"`` is an ``@njit`` range loop,
  ``"parallel"`` the same with ``prange``, ``"cuda"`` a grid-stride loop in a ``@cuda.jit`` kernel.
* ``functions_source(fns, target)``: module-level scalar functions copied as source and decorated for the target.
* ``load_module(tag, source)``: the source written to ``<cache_dir>/<tag>_<hash>.py`` and imported, so Numba's
  disk cache serves its kernels in later processes.

The compiler needs one extension the plain API cannot express, a closing reduction (keyword-only, so the plain
calls stay valid): ``reduce=((var, op), ...)`` declares accumulators that ``body`` updates (``var += e`` for
``op == "+"``, ``var = max(var, e)`` for ``"max"``); they start at the op's identity (a float64 ``0.0`` or
``-inf``). On the CPU they are ``prange`` reductions, and ``epilogue`` (source run once after the loop) stores
them. On CUDA each thread accumulates its grid-stride share, the block combines the threads' values in shared
memory, and thread 0 adds (``cuda.atomic.add``) or maxes (``cuda.atomic.max``) the block's value into
``<var>_out[0]`` (an extra argument, set to the identity by the caller); CUDA has no epilogue (no grid-wide
barrier), so the caller finishes with a second small kernel.

When ``backend.codegen`` offers ``loop_source`` (with that extension), it is used and the stand-in below is idle
(delete it then). Two things stay here either way: the casts the fused bodies use (``float32(...)``) are
imported, and on the CPU the row functions are inlined into the kernels with ``math.exp``/``math.tanh`` replaced
by the vectorizable ``_vexp``/``_vtanh`` (``VECTOR_MATH``), which would serve the eager kernels as well.
"""

from __future__ import annotations

import inspect
import textwrap

from ..backend import codegen as _codegen
from ..backend.codegen import cache_dir, load_module  # noqa: F401 - re-exported: part of the API

#: backend.codegen has the one generator (with closing reductions): use it.
BACKEND = hasattr(_codegen, "loop_source")

#: Threads per CUDA block for compiled kernels (the shared-memory reduction is sized by it).
CUDA_THREADS = getattr(_codegen, "CUDA_THREADS", 256)

_IDENTITY = {"+": "0.0", "max": "-math.inf"}


def _indent(source: str, spaces: int) -> str:
    return textwrap.indent(textwrap.dedent(source).strip("\n"), " " * spaces)


def loop_source(target: str, name: str, args, body: str, n: str, *, reduce: tuple = (), epilogue: str = "") -> str:
    """Source of one kernel ``def name(args)`` that runs ``body`` for each ``i`` in ``range(n)``."""
    if BACKEND:
        return _codegen.loop_source(target, name, args, body, n, reduce=reduce, epilogue=epilogue)
    arglist = list(args)
    if target in ("serial", "parallel"):
        parallel = target == "parallel"
        # A float sum is a chain of dependent adds unless they may be reassociated: ``reassoc`` on the kernel lets
        # LLVM vectorize it (5x at 1e5). The row functions are inlined into the kernel, so their arithmetic may be
        # reassociated too (a few ulp); NaN, inf and signed zeros keep IEEE semantics (no nnan/ninf/nsz).
        fastmath = ", fastmath={'reassoc'}" if reduce else ""
        lines = [
            f"@njit(cache=True, nogil=True, error_model='numpy', parallel={parallel}{fastmath})",
            f"def {name}({', '.join(arglist)}):",
        ]
        lines += [f"    {var} = {_IDENTITY[op]}" for var, op in reduce]
        lines.append(f"    for i in {'prange' if parallel else 'range'}({n}):")
        lines.append(_indent(body, 8))
        if epilogue:
            lines.append(_indent(epilogue, 4))
        return "\n".join(lines) + "\n"
    if target != "cuda":
        raise ValueError(f"unknown target {target!r}")
    if epilogue:
        raise ValueError("CUDA kernels have no epilogue (no grid-wide barrier): finish in a second kernel")
    arglist += [f"{var}_out" for var, _ in reduce]
    lines = ["@cuda.jit(cache=True)", f"def {name}({', '.join(arglist)}):"]
    lines += [f"    {var} = {_IDENTITY[op]}" for var, op in reduce]
    lines += [
        "    i = cuda.grid(1)",
        "    _step = cuda.gridsize(1)",
        f"    while i < {n}:",
        _indent(body, 8),
        "        i += _step",
    ]
    for k, (var, op) in enumerate(reduce):
        sh = f"_sh{k}"
        combine = f"{sh}[_t] + {sh}[_t + _s]" if op == "+" else f"max({sh}[_t], {sh}[_t + _s])"
        atomic = "add" if op == "+" else "max"
        lines += [
            f"    {sh} = cuda.shared.array({CUDA_THREADS}, float64)",
            "    _t = cuda.threadIdx.x",
            f"    {sh}[_t] = {var}",
            "    cuda.syncthreads()",
            "    _s = cuda.blockDim.x // 2",  # blocks have a power-of-two size
            "    while _s > 0:",
            "        if _t < _s:",
            f"            {sh}[_t] = {combine}",
            "        cuda.syncthreads()",
            "        _s //= 2",
            "    if _t == 0:",
            f"        cuda.atomic.{atomic}({var}_out, 0, {sh}[0])",
        ]
    return "\n".join(lines) + "\n"


# ``math.exp`` and ``math.tanh`` compile to scalar libm calls (this llvmlite has no SVML, and LLVM's vector
# ``llvm.exp`` is split back into scalar calls), which keeps loops that use them from vectorizing; the table's
# sigmoid also branches per element. These versions are plain arithmetic that LLVM vectorizes: Cephes' exp (a Pade
# form on |r| <= ln2/2, scaled by 2**k in two factors so subnormals come out right; <= 1.5 ulp, inf/nan/0 as libm)
# and Cephes' tanh (a rational form below 0.625, exp above; <= 1 ulp). Measured at 1e5 float64: exp 98 us and tanh
# 165 us against libm's 605 and 1426 us; a sigmoid kernel 207 against 885 us.
VECTOR_MATH = """
from llvmlite import ir as _ir
from numba import types as _types
from numba.core.extending import intrinsic as _intrinsic


@_intrinsic
def _f64_from_bits(typingctx, bits):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], _ir.DoubleType())

    return _types.float64(_types.int64), codegen


@njit(cache=True, inline='always')
def _pow2(k):
    return _f64_from_bits((k + 1023) << 52)


@njit(cache=True, error_model='numpy', inline='always')
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
    ki = int(k)
    half = ki >> 1
    e = e * _pow2(half) * _pow2(ki - half)
    return x if x != x else e


@njit(cache=True, error_model='numpy', inline='always')
def _vtanh(x):
    x = float(x)
    a = abs(x)
    z = _vexp(2.0 * min(a, 40.0))
    big = 1.0 - 2.0 / (z + 1.0)
    big = big if x >= 0 else -big
    zz = x * x
    p = (-9.64399179425052238628e-1 * zz - 9.92877231001918586564e1) * zz - 1.61468768441708447952e3
    q = ((zz + 1.12811678491632931402e2) * zz + 2.23548839060100448583e3) * zz + 4.84406305325125486048e3
    small = x + x * zz * p / q
    return small if a < 0.625 else big

"""


def header(target: str) -> str:
    """The imports a generated module for ``target`` starts with (and, on the CPU, the vectorizable math)."""
    casts = "from numba import float32, float64, int32, int64, int8, int16, uint8\n"
    if BACKEND:
        base = _codegen.header(target) + casts
    elif target == "cuda":
        base = "import math\nfrom numba import cuda\n" + casts
    else:
        base = "import math\nfrom numba import njit, prange\n" + casts
    return base + "\n" if target == "cuda" else base + VECTOR_MATH + "\n"


def functions_source(fns, target: str) -> str:
    """The module-level functions ``fns`` as source, each decorated for ``target`` (an ``@njit`` inlined into its
    callers on the CPU, with the vectorizable ``exp``/``tanh``; a ``@cuda.jit(device=True)`` function on CUDA)."""
    # inline='always' inlines at Numba's IR level: the scalar functions are not compiled on their own, which
    # halves a fused kernel's cold compile (0.75 -> 0.4 s CPU) and lets LLVM if-convert and vectorize the body
    if BACKEND:
        if target == "cuda":
            return _codegen.functions_source(fns, target) + "\n"
        text = _codegen.functions_source(fns, target, inline="always")
        return text.replace("math.exp(", "_vexp(").replace("math.tanh(", "_vtanh(") + "\n"
    decorator = "@cuda.jit(device=True, cache=True)"
    if target != "cuda":
        decorator = "@njit(cache=True, error_model='numpy', inline='always')"
    parts = []
    for fn in fns:
        source = textwrap.dedent(inspect.getsource(fn)).strip("\n")
        if target != "cuda":
            source = source.replace("math.exp(", "_vexp(").replace("math.tanh(", "_vtanh(")
        parts.append(decorator + "\n" + source + "\n")
    return "\n\n".join(parts) + "\n"
