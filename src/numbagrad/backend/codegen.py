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


def _element(arg: str, kind: str, index: str) -> str:
    return f"{arg}[{index}]" if kind == "a" else arg


def cpu_kernel_source(row: Row, which: str, pattern: str, parallel: bool) -> str:
    """One ``@njit`` loop: ``which`` is ``"forward"`` or ``"grad<i>"``; ``pattern`` says, per operand, whether
    it is an array (``a``) indexed per element or a scalar (``s``) broadcast to all."""
    if which == "forward":
        fn = row.forward.__name__
        operands = [f"x{i}" for i in range(row.arity)]
    else:
        fn = row.grads[int(which[4:])].__name__
        operands = ["g", "o"] + [f"x{i}" for i in range(row.arity)]
    params = [f"p{i}" for i in range(len(row.params))]
    args = [_element(a, k, "i") for a, k in zip(operands, pattern)] + params
    loop = "prange" if parallel else "range"
    header = "import math\nfrom numba import njit, prange\n\n"
    kernel = (
        f"@njit(cache=True, error_model='numpy', nogil=True, parallel={parallel})\n"
        f"def kernel(res, {', '.join(operands + params)}):\n"
        f"    for i in {loop}(res.shape[0]):\n"
        f"        res[i] = {fn}({', '.join(args)})\n"
    )
    scalars = scalar_source(row).replace("\ndef ", "\n@njit(cache=True, error_model='numpy')\ndef ")
    scalars = "@njit(cache=True, error_model='numpy')\n" + scalars
    return header + scalars + "\n\n" + kernel


def cpu_kernel(row: Row, which: str, pattern: str, parallel: bool):
    """The compiled (lazily, cached on disk) CPU kernel for one row, operand pattern and variant."""
    key = (row.name, which, pattern, parallel)
    kernel = _kernels.get(key)
    if kernel is None:
        tag = f"{row.name}_{which}_{pattern}{'_par' if parallel else ''}"
        kernel = load_module(tag, cpu_kernel_source(row, which, pattern, parallel)).kernel
        _kernels[key] = kernel
    return kernel


_kernels: dict[tuple, object] = {}
