"""A stand-in for ``backend.codegen``'s one-generator API until it lands (then this module is replaced by it).

Three functions, the signatures the backend's generator will offer:

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
"""

from __future__ import annotations

import inspect
import textwrap

from ..backend.codegen import cache_dir, load_module  # noqa: F401 - re-exported: part of the API

#: Threads per CUDA block for compiled kernels (the shared-memory reduction is sized by it).
CUDA_THREADS = 256

_IDENTITY = {"+": "0.0", "max": "-math.inf"}


def _indent(source: str, spaces: int) -> str:
    return textwrap.indent(textwrap.dedent(source).strip("\n"), " " * spaces)


def loop_source(target: str, name: str, args, body: str, n: str, *, reduce: tuple = (), epilogue: str = "") -> str:
    """Source of one kernel ``def name(args)`` that runs ``body`` for each ``i`` in ``range(n)``."""
    arglist = list(args)
    if target in ("serial", "parallel"):
        parallel = target == "parallel"
        # A float sum is a chain of dependent adds unless they may be reassociated: ``reassoc`` on the kernel
        # (not on the row functions it calls, which keep exact IEEE semantics) lets LLVM vectorize it (5x at 1e5).
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


def header(target: str) -> str:
    """The imports a generated module for ``target`` starts with."""
    if target == "cuda":
        return "import math\nfrom numba import cuda, float32, float64, int32, int64, int8, int16, uint8\n\n"
    return "import math\nfrom numba import njit, prange, float32, float64, int32, int64, int8, int16, uint8\n\n"


def functions_source(fns, target: str) -> str:
    """The module-level functions ``fns`` as source, each decorated for ``target`` (an inlinable ``@njit`` on the
    CPU, a ``@cuda.jit(device=True)`` function on CUDA)."""
    decorator = "@cuda.jit(device=True, cache=True)" if target == "cuda" else "@njit(cache=True, error_model='numpy')"
    parts = []
    for fn in fns:
        parts.append(decorator + "\n" + textwrap.dedent(inspect.getsource(fn)).strip("\n") + "\n")
    return "\n\n".join(parts) + "\n"
