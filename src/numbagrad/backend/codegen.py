"""Kernel source generated from the elementwise table, written to the cache directory and imported.

Why files: Numba's disk cache (``cache=True``) is keyed by a function's source file and qualified name. Kernels
made by closures share one name and miss the cache in every new process; real ``.py`` files named by a hash of
their source hit it (a few ms per kernel instead of a 100-500 ms compile). The generated file carries a copy of
the row's scalar functions, so a change in ``scalar_math`` changes the hash and never serves a stale kernel.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import sys
import textwrap

from .. import scalar_math
from ..scalar_math import Row

_loaded: dict[str, object] = {}


def cache_dir() -> str:
    """``NUMBAGRAD_CACHE_DIR``, else ``NUMBA_CACHE_DIR/numbagrad``, else ``~/.cache/numbagrad``."""
    path = os.environ.get("NUMBAGRAD_CACHE_DIR")
    if not path:
        numba_dir = os.environ.get("NUMBA_CACHE_DIR")
        if numba_dir:
            path = os.path.join(numba_dir, "numbagrad")
        else:
            base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
            path = os.path.join(base, "numbagrad")
    return path


def scalar_source(row: Row) -> str:
    """The row's forward and gradient functions, plus ``select``, as source text."""
    fns = [scalar_math.select, row.forward, *row.grads]
    return "\n\n".join(textwrap.dedent(inspect.getsource(f)) for f in fns)


def load_module(tag: str, source: str):
    """Write ``source`` to ``<cache>/<tag>_<hash>.py`` once, import it once per process."""
    import numba

    digest = hashlib.sha1((numba.__version__ + source).encode()).hexdigest()[:16]
    name = f"numbagrad_kernels_{tag}_{digest}"
    module = _loaded.get(name)
    if module is not None:
        return module
    directory = cache_dir()
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name + ".py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    _loaded[name] = module
    return module


def is_portable(fn) -> bool:
    """True for a module-level ``def`` whose source can be copied into a generated file (and so be served from
    Numba's disk cache). Lambdas, closures and nested functions are compiled per process instead."""
    name = getattr(fn, "__name__", "")
    if not name.isidentifier() or getattr(fn, "__closure__", None) or "<locals>" in getattr(fn, "__qualname__", ""):
        return False
    try:
        inspect.getsource(fn)
    except (OSError, TypeError):
        return False
    return True


def _element(arg: str, kind: str, index: str) -> str:
    return f"{arg}[{index}]" if kind == "a" else arg


def _row_function(row: Row, which: str):
    return row.forward if which == "forward" else row.grads[int(which[4:])]


def _loop_source(row: Row, which: str, pattern: str, parallel: bool, fn_name: str) -> str:
    """The ``@njit`` loop ``res[i] = fn_name(operands[i]..., params...)``; ``pattern`` says, per operand,
    whether it is an array (``a``) indexed per element or a scalar (``s``) broadcast to all."""
    operands = [f"x{i}" for i in range(row.arity)]
    if which != "forward":
        operands = ["g", "o", *operands]
    params = [f"p{i}" for i in range(len(row.params))]
    args = [_element(a, k, "i") for a, k in zip(operands, pattern)] + params
    loop = "prange" if parallel else "range"
    return (
        f"@njit(cache=CACHE, error_model='numpy', nogil=True, parallel={parallel})\n"
        f"def kernel(res, {', '.join(operands + params)}):\n"
        f"    for i in {loop}(res.shape[0]):\n"
        f"        res[i] = {fn_name}({', '.join(args)})\n"
    )


def cpu_kernel_source(row: Row, which: str, pattern: str, parallel: bool) -> str:
    """A whole generated module: the row's scalar functions (``@njit``) and one loop over them."""
    header = "import math\nfrom numba import njit, prange\n\nCACHE = True\n\n"
    scalars = scalar_source(row).replace("\ndef ", "\n@njit(cache=True, error_model='numpy')\ndef ")
    scalars = "@njit(cache=True, error_model='numpy')\n" + scalars
    kernel = _loop_source(row, which, pattern, parallel, _row_function(row, which).__name__)
    return header + scalars + "\n\n" + kernel


def _process_kernel(row: Row, which: str, pattern: str, parallel: bool):
    """The same loop for a row whose functions are lambdas or closures: compiled per process, never cached."""
    from numba import njit, prange

    namespace = {
        "njit": njit,
        "prange": prange,
        "CACHE": False,
        "fn": njit(error_model="numpy")(_row_function(row, which)),
    }
    exec(_loop_source(row, which, pattern, parallel, "fn"), namespace)  # noqa: S102 - our own generated text
    return namespace["kernel"]


def cpu_kernel(row: Row, which: str, pattern: str, parallel: bool):
    """The compiled (lazily, cached on disk) CPU kernel for one row, operand pattern and variant."""
    key = (row.name, which, pattern, parallel)  # row names are unique (user rows included)
    kernel = _kernels.get(key)
    if kernel is None:
        if all(is_portable(f) for f in (row.forward, *row.grads)):
            tag = f"{row.name}_{which}_{pattern}{'_par' if parallel else ''}"
            kernel = load_module(tag, cpu_kernel_source(row, which, pattern, parallel)).kernel
        else:
            kernel = _process_kernel(row, which, pattern, parallel)
        _kernels[key] = kernel
    return kernel


_kernels: dict[tuple, object] = {}
