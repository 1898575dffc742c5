"""The compiler's access to the one kernel generator, ``backend.codegen``.

Three functions, the generator's API:

* ``loop_source(target, name, args, body, n)``: one kernel ``def name(args)`` running ``body`` (which may be
  several lines and uses the index ``i``) for ``i`` in ``range(n)``: ``"serial"`` is an ``@njit`` range loop,
  ``"parallel"`` the same with ``prange``, ``"cuda"`` a grid-stride loop in a ``@cuda.jit`` kernel.
* ``functions_source(fns, target)``: module-level scalar functions copied as source and decorated for the target
  (``copyable(fns)`` adds the module-level helpers they call, such as ``power``).
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

The casts the fused bodies use (``float32(...)``) are imported, and on the CPU the row functions are inlined
into the kernels with the backend's vectorizable ``exp``/``tanh`` (``backend.vector_math``).
"""

from __future__ import annotations

from ..backend import codegen as _codegen
from ..backend.codegen import cache_dir, copyable, load_module  # noqa: F401 - re-exported: part of the API

#: Threads per CUDA block for compiled kernels (the shared-memory reduction is sized by it).
CUDA_THREADS = _codegen.CUDA_THREADS


def loop_source(target: str, name: str, args, body: str, n: str, *, reduce: tuple = (), epilogue: str = "") -> str:
    """Source of one kernel ``def name(args)`` that runs ``body`` for each ``i`` in ``range(n)``."""
    return _codegen.loop_source(target, name, args, body, n, reduce=reduce, epilogue=epilogue)


def header(target: str) -> str:
    """The imports a generated module for ``target`` starts with (the backend's, plus the casts)."""
    return _codegen.header(target) + "from numba import float32, float64, int32, int64, int8, int16, uint8\n\n"


def functions_source(fns, target: str, single=()) -> str:
    """The module-level functions ``fns`` as source, each decorated for ``target`` (an ``@njit`` inlined into its
    callers on the CPU, with the vectorizable ``exp``/``tanh``, and float32 twins of ``single``; a
    ``@cuda.jit(device=True)`` function on CUDA)."""
    # inline='always' inlines at Numba's IR level: the scalar functions are not compiled on their own, which
    # halves a fused kernel's cold compile (0.4 s on the CPU against 0.75) and lets LLVM if-convert and vectorize
    # the body
    if target == "cuda":
        return _codegen.functions_source(fns, target) + "\n"
    return _codegen.functions_source(fns, target, inline="always", vector=True, single=single) + "\n"
