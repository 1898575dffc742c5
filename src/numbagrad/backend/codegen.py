"""The one kernel generator: every loop numbagrad runs is written here, for the CPU and for CUDA alike.

From the same scalar function(s), ``loop_source`` emits a serial ``@njit`` loop, a ``prange`` loop or a CUDA
grid-stride kernel; ``functions_source`` copies module-level scalar functions beside it, decorated for the target.
The kernel families built on them: table rows (forward and gradients, ``row_kernel``), gradient
accumulation, ``foreach`` optimizer updates and ``apply_``/``map_`` kernels over a user callable. Every kernel
(these, the cuda backend's own and the compiler's fused ones) is kept in one cache, ``KERNELS``.

Why files: Numba's disk cache (``cache=True``) is keyed by a function's source file and qualified name. Kernels
made by closures share one name and miss the cache in every new process; real ``.py`` files named by a hash of
their source hit it (a few ms per kernel instead of a 100-500 ms compile). A generated file carries a copy of its
scalar functions, so a change in them changes the hash and never serves a stale kernel. Callables that cannot be
copied (lambdas, closures, functions reading other globals) go through the same ``loop_source`` text, compiled
in memory once per process.

The cache repairs itself (``_CacheGuard``): a damaged Numba index or data file is removed and the kernel compiled
again, a damaged generated file is rewritten, and a directory that cannot be written falls back to compiling in
memory, each with one warning naming the directory. Compilations are logged on the ``numbagrad`` logger.
Nothing here imports Numba at import time.
"""

from __future__ import annotations

import ast
import builtins
import cmath
import dis
import glob
import hashlib
import inspect
import logging
import math
import os
import re
import sys
import tempfile
import textwrap
import threading
import time
import types
import uuid
import warnings
from collections.abc import Callable, Sequence

from .. import scalar_math
from ..scalar_math import Row
from . import vector_math

log = logging.getLogger("numbagrad")

#: Prefix of every generated module (and so of its file and of Numba's index and data files).
PREFIX = "numbagrad_kernels_"
#: The line of a generated module's header that ``cache=CACHE`` decorators read; in memory it becomes False.
CACHE_ON = "CACHE = True\n"
CACHE_OFF = "CACHE = False\n"
_CPU_TARGETS = ("serial", "parallel", "cpu")
_RESERVED = frozenset({"kernel", "math", "cmath", "njit", "prange", "cuda", "types", "CACHE", "fma"})

#: The definition of the table's ``fma`` (``scalar_math.fma``) in a generated module whose functions call it: the
#: processor's fused multiply-add (``llvm.fma``; CUDA's ``fma`` instruction), on float64 operands.
FMA_SOURCE = {
    "cpu": """from numba.core import types as _fma_types
from numba.extending import intrinsic as _fma_intrinsic


@_fma_intrinsic
def fma(typingctx, a, b, c):
    # a * b + c rounded once, in float64
    def codegen(context, builder, signature, args):
        f64 = _fma_types.float64
        return builder.fma(*[context.cast(builder, v, t, f64) for v, t in zip(args, signature.args)])

    if all(isinstance(t, _fma_types.Number) for t in (a, b, c)):
        return _fma_types.float64(a, b, c), codegen
""",
    "cuda": """@cuda.jit(device=True, cache=CACHE)
def fma(a, b, c):
    # a * b + c rounded once, in float64
    return cuda.fma(float64(a), float64(b), float64(c))
""",
}


class KernelCacheWarning(RuntimeWarning):
    """The kernel cache was damaged (and repaired) or could not be used (kernels compiled in memory)."""


# --- the cache directory ------------------------------------------------------------------------------------
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
    return os.path.abspath(path)


_lock = threading.RLock()
_usable: dict[str, bool] = {}  # directory -> can generated files (and Numba's index beside them) be written there
_warned: set[tuple[str, str]] = set()  # (kind, directory): one warning of each kind per directory and process
_announced = False  # the one-time INFO note before the first compilation of a process


def _warn_once(kind: str, directory: str, message: str) -> None:
    with _lock:
        if (kind, directory) in _warned:
            return
        _warned.add((kind, directory))
    warnings.warn(message, KernelCacheWarning, stacklevel=4)


def _directory_usable(directory: str) -> bool:
    """Create the directory (and the ``__pycache__`` Numba writes into) and prove it writable, once per process."""
    usable = _usable.get(directory)
    if usable is None:
        try:
            os.makedirs(os.path.join(directory, "__pycache__"), exist_ok=True)
            for path in (directory, os.path.join(directory, "__pycache__")):
                tempfile.TemporaryFile(dir=path).close()
            usable = True
        except OSError as err:
            _warn_unusable(directory, err)
            usable = False
        _usable[directory] = usable
    return usable


def _warn_unusable(directory: str, err: Exception) -> None:
    _warn_once(
        "unusable",
        directory,
        f"numbagrad: the kernel cache directory {directory} cannot be used ({type(err).__name__}: {err}); "
        "compiling kernels in memory instead, so every process compiles them again. Set NUMBAGRAD_CACHE_DIR to a "
        "writable directory to cache them.",
    )


def _warn_damaged(directory: str, what: str) -> None:
    _warn_once(
        "damaged",
        directory,
        f"numbagrad: removed damaged entries from the kernel cache in {directory} ({what}); they are "
        "rebuilt (compiled again where needed) and cached afresh.",
    )


# --- source text: the single place loops are written --------------------------------------------------------
def header(target: str) -> str:
    """Imports and the ``CACHE`` flag every generated module starts with."""
    imports = "from numba import cuda, float64" if target == "cuda" else "from numba import njit, prange"
    return f"import math\n{imports}\n\n{CACHE_ON}"


def _join(args) -> str:
    return args if isinstance(args, str) else ", ".join(args)


def _indent(body: str, spaces: int) -> str:
    return textwrap.indent(textwrap.dedent(body).strip("\n"), " " * spaces) + "\n"


#: Threads per block that a CUDA kernel with a closing reduction is launched with (its shared array's size).
CUDA_THREADS = 256
_IDENTITY = {"+": "0.0", "max": "-math.inf"}


def loop_source(target: str, name: str, args: Sequence[str] | str, body: str, n: str, *, reduce: tuple = (),
                epilogue: str = "", reassociate: bool = False) -> str:  # fmt: skip
    """Source of one kernel ``def name(args)`` running ``body`` (text using the index ``i``, one line or several)
    for ``i`` in ``0..n-1``: a serial ``@njit`` loop (``"serial"``), a ``prange`` loop (``"parallel"``) or a
    CUDA grid-stride kernel (``"cuda"``). ``n`` is an expression over the arguments, e.g. ``"res.shape[0]"``.

    ``reduce=((var, op), ...)`` adds closing reductions (``op`` ``"+"`` or ``"max"``): ``var`` starts at the op's
    float64 identity and ``body`` updates it (``var += e``, ``var = max(var, e)``). On the CPU they are ``prange``
    reductions (the kernel may reassociate them, so a sum vectorises) and ``epilogue`` runs once after the loop.
    On CUDA each thread reduces its grid-stride share, each block combines its threads in shared memory (launch
    ``CUDA_THREADS`` threads per block, a power of two) and thread 0 adds or maxes the block's value into
    ``<var>_out[0]``, an extra argument the caller sets to the identity; CUDA has no epilogue (no grid barrier).
    ``reassociate`` lets a CPU loop reorder the sums ``body`` accumulates in its own variables, as ``reduce`` does.
    """
    if target == "cuda":
        if epilogue:
            raise ValueError("CUDA kernels have no epilogue (no grid-wide barrier): finish in a second kernel")
        lines = ["@cuda.jit(cache=CACHE)", f"def {name}({_join([*_split(args), *(f'{v}_out' for v, _ in reduce)])}):"]
        lines += [f"    {var} = {_IDENTITY[op]}" for var, op in reduce]
        lines += ["    i = cuda.grid(1)", "    _stride = cuda.gridsize(1)", f"    _n = {n}", "    while i < _n:"]
        lines += [_indent(body, 8).rstrip("\n"), "        i += _stride"]
        for k, (var, op) in enumerate(reduce):
            sh = f"_sh{k}"
            combine = f"{sh}[_t] + {sh}[_t + _s]" if op == "+" else f"max({sh}[_t], {sh}[_t + _s])"
            lines += [
                f"    {sh} = cuda.shared.array({CUDA_THREADS}, float64)",
                "    _t = cuda.threadIdx.x",
                f"    {sh}[_t] = {var}",
                "    cuda.syncthreads()",
                "    _s = cuda.blockDim.x // 2",
                "    while _s > 0:",
                "        if _t < _s:",
                f"            {sh}[_t] = {combine}",
                "        cuda.syncthreads()",
                "        _s //= 2",
                "    if _t == 0:",
                f"        cuda.atomic.{'add' if op == '+' else 'max'}({var}_out, 0, {sh}[0])",
            ]
        return "\n".join(lines) + "\n"
    if target not in ("serial", "parallel"):
        raise ValueError(f"unknown kernel target {target!r} (expected 'serial', 'parallel' or 'cuda')")
    parallel = target == "parallel"
    options = (", parallel=True" if parallel else "") + (", fastmath={'reassoc'}" if reduce or reassociate else "")
    lines = [f"@njit(cache=CACHE, nogil=True, error_model='numpy'{options})", f"def {name}({_join(args)}):"]
    lines += [f"    {var} = {_IDENTITY[op]}" for var, op in reduce]
    lines += [f"    for i in {'prange' if parallel else 'range'}({n}):", _indent(body, 8).rstrip("\n")]
    if epilogue:
        lines.append(_indent(epilogue, 4).rstrip("\n"))
    return "\n".join(lines) + "\n"


def _split(args) -> list[str]:
    return [a.strip() for a in args.split(",")] if isinstance(args, str) else list(args)


def _function_text(fn: Callable) -> str:
    """``fn``'s own source from its ``def`` line on (decorators dropped), dedented."""
    source = textwrap.dedent(inspect.getsource(fn))
    node = ast.parse(source).body[0]
    return "\n".join(source.splitlines()[node.lineno - 1 :]) + "\n"


def functions_source(fns: Sequence[Callable], target: str, inline: str = "never", vector: bool = False,
                     single: Sequence[Callable] = (), fix_up: Sequence[Callable] = ()) -> str:  # fmt: skip
    """Module-level scalar functions copied as source text and decorated for ``target``: ``@njit`` (any CPU
    target) or ``@cuda.jit(device=True)``. ``inline="always"`` inlines them at Numba IR level (the optimizer
    updates, whose branches on constant flags then fold away). ``vector=True`` (CPU only) swaps in the
    vectorizable ``exp``/``tanh`` of ``vector_math`` (and copies it) so loops over them vectorize, and copies the
    CPU's own versions of the functions ``vector_math.CPU_VERSIONS`` names in their place. ``single`` (CPU, with
    ``vector``): functions that also get a float32 twin ``<name>_f32`` (``vector_math.single_precision``).
    ``fix_up`` (CPU, with ``vector``): functions that also get a twin ``<name>_fast`` calling the fast versions of
    sin, cos, tan and fmod, which give nan where the exact ones must decide (``vector_math.fix_up_twin``)."""
    text = _copies(fns, target, inline, vector, single, fix_up)
    if any(f.__globals__.get("fma") is scalar_math.fma and "fma" in _global_names(f.__code__) for f in fns):
        text = FMA_SOURCE["cuda" if target == "cuda" else "cpu"] + "\n\n" + text
    return text


def _copies(fns, target, inline, vector, single, fix_up) -> str:
    """The copies of ``functions_source`` (without the definition of ``fma``)."""
    if target == "cuda":
        decorator = "@cuda.jit(device=True, cache=CACHE)\n"
    elif target in _CPU_TARGETS:
        inline_arg = "" if inline == "never" else f", inline={inline!r}"
        decorator = f"@njit(cache=CACHE, error_model='numpy'{inline_arg})\n"
    else:
        raise ValueError(f"unknown kernel target {target!r}")
    if not (vector and target in _CPU_TARGETS):
        return "\n\n".join(decorator + _function_text(f) for f in _unique(fns))
    own = [_cpu_version(f) for f in _unique(fns)]
    text = "\n\n".join(v or decorator + _function_text(f) for f, v in zip(_unique(fns), own))
    parts = [vector_math.vectorized(text)]
    if single:
        twins = "\n\n".join(
            decorator + (_single_version(f) or vector_math.single_precision(_function_text(f))) for f in _unique(single)
        )
        parts = [vector_math.SOURCE.strip("\n"), vector_math.SINGLE_SOURCE.strip("\n"), parts[0], twins]
    elif parts[0] != text or any(own) or fix_up:
        parts.insert(0, vector_math.SOURCE.strip("\n"))
    if fix_up:
        parts.append("\n\n".join(decorator + vector_math.fix_up_twin(_function_text(f)) for f in _unique(fix_up)))
    return "\n\n\n".join(parts)


def _single_version(fn: Callable) -> str | None:
    """The hand-written float32 twin of a table function (``vector_math.SINGLE_VERSIONS``: gelu's), or None."""
    if getattr(scalar_math, fn.__name__, None) is fn:
        version = vector_math.SINGLE_VERSIONS.get(fn.__name__)
        return version.strip("\n") + "\n" if version else None
    return None


def _cpu_version(fn: Callable) -> str | None:
    """The CPU kernels' own version of a table function (``vector_math.CPU_VERSIONS``: ``root``, ``round_``), or
    None."""
    if getattr(scalar_math, fn.__name__, None) is fn:
        return vector_math.CPU_VERSIONS.get(fn.__name__)
    return None


def module_source(target: str, *parts: str) -> str:
    """A whole generated module: the header, then ``parts`` (functions and kernels); ``cmath`` is imported only
    where the complex rows' functions use it (so the real kernels' text, and their cache files, stay the same)."""
    body = "\n\n".join(p.strip("\n") + "\n" for p in parts)
    return ("import cmath\n" if "cmath." in body else "") + header(target) + "\n\n" + body


def _unique(fns):
    seen, out = set(), []
    for f in fns:
        if id(f) not in seen:
            seen.add(id(f))
            out.append(f)
    return out


# --- which callables can be copied into files ---------------------------------------------------------------
def _global_names(code) -> set[str]:
    names = {ins.argval for ins in dis.get_instructions(code) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def is_portable(fn, companions: Sequence[Callable] = ()) -> bool:
    """True for a module-level ``def`` whose source can be copied into a generated file (and so be served from
    Numba's disk cache): it reads no globals but ``math``, the table's ``select``, builtins and the ``companions``
    copied beside it. Lambdas, closures, nested functions and Numba dispatchers are compiled per process instead."""
    name = getattr(fn, "__name__", "")
    code = getattr(fn, "__code__", None)
    if (
        code is None
        or not isinstance(fn, types.FunctionType)
        or not name.isidentifier()
        or name in _RESERVED
        or fn.__closure__
        or "<locals>" in fn.__qualname__
    ):
        return False
    allowed = {getattr(c, "__name__", None): c for c in companions}
    for g in _global_names(code):
        value = fn.__globals__.get(g, _MISSING)
        if (g == "math" and value is math) or (g == "cmath" and value is cmath):
            continue
        if g == "select" and value is scalar_math.select:
            continue
        if g == "fma" and value is scalar_math.fma:  # (``FMA_SOURCE`` defines it)
            continue
        if g in allowed and value is allowed[g]:
            continue
        if value is _MISSING and hasattr(builtins, g):
            continue
        return False
    try:
        _function_text(fn)
    except (OSError, TypeError, SyntaxError, IndexError):
        return False
    return True


_MISSING = object()


def copyable(fns: Sequence[Callable]) -> list | None:
    """``fns`` plus the module-level functions they call (``select``, helpers, transitively), when all of them
    can be copied into a generated file under distinct names; else None (compile in memory)."""
    out = _unique(f for f in fns if isinstance(f, types.FunctionType))
    if len(out) != len(fns):
        return None
    k = 0
    while k < len(out):
        f = out[k]
        k += 1
        # in name order: a set's order changes with the process's string hashing, and the copies' order is part of
        # the generated text, whose hash names the cached file
        for g in sorted(_global_names(f.__code__)):
            value = f.__globals__.get(g)
            if value is scalar_math.fma:  # (not copied: ``FMA_SOURCE`` defines it)
                continue
            if isinstance(value, types.FunctionType) and all(value is not o for o in out):
                out.append(value)
    if len({f.__name__ for f in out}) != len(out) or not all(is_portable(f, out) for f in out):
        return None
    return out


# --- the one kernel cache, and loading generated modules ---------------------------------------------------
#: The one kernel cache of the process: every kernel the backends and the compiler run, by key. Row kernels (eager
#: CPU and CUDA) are keyed ``(row name, which, pattern, target)``, plus the operand written in place (``into``);
#: the backends look them up here directly, on every op. Generated modules (the compiler's fused kernels) are
#: keyed ``("module", name)``, their name holding their source's hash; the other families by their kind first
#: (``("accumulate", target)``, ``("foreach", ...)``, the cuda backend's ``("assign", ...)``).
KERNELS: dict[tuple, object] = {}
#: An index of ``KERNELS``: row name -> {pattern: the serial forward kernel}, filled by ``row_kernel``. The
#: elementwise fast path looks a kernel up here by two string keys, without building and hashing a key tuple.
SERIAL_FORWARD: dict[str, dict] = {}


_host: list = []
_numba_started = False


def host_cpu() -> tuple:
    """LLVM's name for this host's CPU and its feature map, read once: the kernels' vector width
    (``row_products.vector_bytes``), the products' measured-host choices and Numba's features
    (``start_numba``) all come from it."""
    if not _host:
        from llvmlite import binding

        _host.extend((binding.get_host_cpu_name(), binding.get_host_cpu_features()))
    return _host[0], _host[1]


def start_numba() -> None:
    """Import Numba for numbagrad's first kernel, first letting its CPU code use the host's whole SIMD width.

    LLVM tunes code for Intel's AVX-512 cores to prefer 256-bit vectors (its ``prefer-256-bit``), so the loops
    LLVM vectorizes ran at half the width the host has. Without that preference (one thread, float32, Xeon with
    AVX-512): GELU forward of (768, 512) 326 -> 237 us, forward and backward 917 -> 700, tanh of 1e5 elements 81
    -> 59. Numba fixes its CPU features when its CPU target starts (its first decorator or compilation): started
    earlier (the user's own Numba code first), or where the user chose them (``NUMBA_CPU_NAME``,
    ``NUMBA_CPU_FEATURES``), this changes nothing. Every CPU kernel's first use calls this."""
    global _numba_started
    if _numba_started:
        return
    _numba_started = True
    from numba.core import config

    if config.CPU_NAME is None and config.CPU_FEATURES is None:
        features = host_cpu()[1]
        if features.get("avx512f"):
            config.CPU_FEATURES = features.flatten() + ",-prefer-256-bit"


def load_module(tag: str, source: str) -> types.ModuleType:
    """The module of ``source``: written to ``<cache>/numbagrad_kernels_<tag>_<hash>.py`` once, executed once
    per process, its Numba dispatchers guarded (damaged cache entries are rebuilt; compilations are logged).

    A damaged file is rewritten; an unusable directory makes it compile in memory (``cache=False``)."""
    start_numba()
    import numba

    origin = (tag, source)  # what the warm-up manifest records: this call again makes this module
    source = vector_math.used_only(source)
    digest = hashlib.sha1((numba.__version__ + source).encode()).hexdigest()[:16]
    name = f"{PREFIX}{tag}_{digest}"
    module = KERNELS.get(("module", name))
    if module is not None:
        return module
    with _lock:
        module = KERNELS.get(("module", name))
        if module is not None:
            return module
        directory = cache_dir()
        path = os.path.join(directory, name + ".py")
        if _directory_usable(directory) and _write_source(path, source, directory):
            module = _exec_module(name, source, path)
        else:
            module = _exec_module(name, source.replace(CACHE_ON, CACHE_OFF, 1), f"<{name}>")
        guard_dispatchers(vars(module), tag, directory, origin)
        KERNELS["module", name] = module
    return module


def _write_source(path: str, source: str, directory: str) -> bool:
    """Make the file at ``path`` hold exactly ``source`` (rewriting a damaged one); False if it cannot be written.
    Writes go through a temporary file and an atomic rename, so concurrent processes never read half a file."""
    data = source.encode()
    try:
        with open(path, "rb") as f:
            existing = f.read()
    except OSError:
        existing = None
    if existing == data:
        return True
    if existing is not None:
        _warn_damaged(directory, f"{os.path.basename(path)} did not match its hash")
    tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        _warn_unusable(directory, err)
        return False
    return True


def _exec_module(name: str, source: str, filename: str) -> types.ModuleType:
    """Execute ``source`` as module ``name`` whose functions report ``filename`` (Numba's cache locates them by
    it). Compiled from the text in hand, not from the file or a ``.pyc``, so a damaged file cannot break it."""
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102 - our own generated text
    return module


def exec_source(source: str, target: str, tag: str = "in-memory", **callables) -> dict:
    """Compile generated kernel text in memory, with ``callables`` (lambdas, closures, dispatchers) bound as
    Numba functions of ``target`` under the given names: per process, never cached on disk."""
    from numba import njit

    scope: dict = {}
    for name, fn in callables.items():
        if target == "cuda":
            from numba import cuda

            scope[name] = cuda.jit(device=True)(getattr(fn, "py_func", fn))
        else:
            scope[name] = fn if hasattr(fn, "py_func") else njit(error_model="numpy")(fn)
    body = header(target).replace(CACHE_ON, CACHE_OFF) + "\n" + source
    exec(compile(body, f"<numbagrad {tag}>", "exec"), scope)  # noqa: S102 - our own generated text
    guard_dispatchers({k: v for k, v in scope.items() if k not in callables}, tag, None)
    return scope


# --- the guard around Numba's per-function disk cache -------------------------------------------------------
def guard_dispatchers(namespace: dict, tag: str, directory: str | None, origin: tuple | str | None = None) -> None:
    """Wrap the disk cache of every Numba dispatcher in ``namespace`` in a ``_CacheGuard`` (CUDA simulator
    kernels have none and are left alone).

    ``origin`` says how another process finds the dispatchers again, for the warm-up manifest: ``(tag, source)``
    of a generated module (``load_module``), or the dotted name of an importable module; None for kernels that
    exist only in this process (in-memory closures)."""
    for name, obj in namespace.items():
        cache = getattr(obj, "_cache", None)
        if cache is not None and hasattr(obj, "py_func") and not isinstance(cache, _CacheGuard):
            obj._cache = _CacheGuard(cache, f"{tag}.{name}", directory, (origin, name))


class _CacheGuard:
    """Numba's cache for one dispatcher, consulted only when a signature is first compiled in a process (never on
    the call path): an entry that fails to load, or holds another signature (two processes racing to write one
    index), is removed and the kernel compiled again; each compilation is logged with its time."""

    def __init__(self, cache, label: str, directory: str | None, where: tuple = (None, "")) -> None:
        self._cache, self._label, self._directory, self._where = cache, label, directory, where
        self._started: dict = {}

    def __getattr__(self, name):
        return getattr(self._cache, name)

    def load_overload(self, sig, target_context):
        _requested.setdefault((*self._where, _arg_types(sig)), None)
        start = time.perf_counter()
        try:
            data = self._cache.load_overload(sig, target_context)
            if data is not None and not _holds_signature(data, sig):
                raise ValueError(f"the entry for {sig} holds another signature")
        except Exception as err:  # a damaged entry: pickle, EOF, value and attribute errors alike
            self._remove(f"{self._label}: {type(err).__name__}: {err}")
            data = None
        if data is None:
            _announce(self._directory)
            self._started[sig] = time.perf_counter()
        else:
            log.debug("loaded kernel %s%s from the disk cache in %.3f s", self._label, _sig(sig), _since(start))
        return data

    def save_overload(self, sig, data) -> None:
        start = self._started.pop(sig, None)
        if start is not None:
            log.debug("compiled kernel %s%s in %.2f s", self._label, _sig(sig), _since(start))
        try:
            self._cache.save_overload(sig, data)
        except Exception as err:  # an index damaged meanwhile, a full disk: the compiled kernel still works
            self._remove(f"{self._label}: saving failed: {type(err).__name__}: {err}")

    def _remove(self, what: str) -> None:
        """Delete this function's index and data files, with one warning naming the cache directory."""
        cache_file = getattr(self._cache, "_cache_file", None)
        index = getattr(cache_file, "_index_path", None)
        if index is None:
            return
        base = index[: -len(".nbi")]
        for path in [index, *glob.glob(glob.escape(base) + ".*.nbc")]:
            try:
                os.unlink(path)
            except OSError:
                pass
        _warn_damaged(self._directory or os.path.dirname(index), what)


# --- the record of requested kernels, and the warm-up manifest made from it ---------------------------------
#: Every (origin, function name, argument types) this process compiled or loaded, in order: ``_CacheGuard`` adds
#: one entry when a dispatcher meets a signature for the first time, so a kernel call never touches it.
_requested: dict[tuple, None] = {}
MANIFEST_FORMAT = "numbagrad-warmup-manifest-1"


def _arg_types(sig) -> tuple:
    from numba.core import sigutils

    return tuple(sigutils.normalize_signature(sig)[0])


def requested_kernels() -> list[tuple]:
    """The (origin, function name, argument types) of every kernel signature this process has compiled or
    loaded so far (see ``guard_dispatchers`` for ``origin``)."""
    return list(_requested)


def _encode_type(t):
    """A Numba argument type as JSON: arrays, numbers, booleans, None and tuples of them (what kernels take)."""
    from numba.core import types as nt
    from numba.np import numpy_support

    if isinstance(t, nt.Array):
        return {"array": _encode_type(t.dtype), "ndim": t.ndim, "layout": t.layout, "readonly": not t.mutable}
    if isinstance(t, nt.BaseTuple):
        return {"tuple": [_encode_type(item) for item in t.types]}
    if isinstance(t, nt.NoneType):
        return "none"
    if isinstance(t, (nt.Number, nt.Boolean)):
        return numpy_support.as_dtype(t).name
    raise TypeError(f"no manifest form for the Numba type {t}")


def _decode_type(code):
    import numpy as np
    from numba.core import types as nt
    from numba.np import numpy_support

    if isinstance(code, dict) and "array" in code:
        dtype = _decode_type(code["array"])
        return nt.Array(dtype, code["ndim"], code["layout"], readonly=code["readonly"])
    if isinstance(code, dict) and "tuple" in code:
        return nt.BaseTuple.from_types([_decode_type(item) for item in code["tuple"]])
    if code == "none":
        return nt.none
    return numpy_support.from_dtype(np.dtype(code))


def manifest() -> dict:
    """The process's record as a JSON-ready manifest. Each entry names its kernel by the generated module's
    source (so a process with an empty cache directory can write and compile it) or by an importable module;
    kernels that exist only in this process (closures compiled in memory) cannot be found again and are left out."""
    import numba

    entries = []
    for origin, function, args in _requested:
        if origin is None:
            continue
        try:
            codes = [_encode_type(t) for t in args]
        except TypeError as err:
            log.debug("warm-up manifest leaves out %s: %s", function, err)
            continue
        where = {"module": origin} if isinstance(origin, str) else {"tag": origin[0], "source": origin[1]}
        entries.append({**where, "function": function, "args": codes})
    return {"format": MANIFEST_FORMAT, "numba": numba.__version__, "kernels": entries}


def replay(manifest: dict) -> int:
    """Compile (or load from the disk cache) every kernel signature of ``manifest`` in this process; returns
    how many signatures it holds. The kernels are the same dispatchers later calls find (``load_module`` executes
    a module once per process), so those calls compile nothing."""
    import importlib

    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise ValueError(f"not a numbagrad warm-up manifest (expected format {MANIFEST_FORMAT!r})")
    for entry in manifest["kernels"]:
        if "module" in entry:
            module = importlib.import_module(entry["module"])
        else:
            module = load_module(entry["tag"], entry["source"])
        getattr(module, entry["function"]).compile(tuple(_decode_type(code) for code in entry["args"]))
    return len(manifest["kernels"])


def _holds_signature(data, sig) -> bool:
    """Whether a loaded cache entry was compiled for ``sig`` (CPU compile results and CUDA kernels)."""
    from numba.core import sigutils

    args = tuple(sigutils.normalize_signature(sig)[0])
    signature = getattr(data, "signature", None)
    loaded = getattr(signature, "args", None)
    if loaded is None:
        loaded = getattr(data, "argtypes", None)
    return loaded is None or tuple(loaded) == args


def _announce(directory: str | None) -> None:
    global _announced
    if _announced:
        return
    _announced = True
    directory = directory or cache_dir()
    if _usable.get(directory, True):
        log.info("compiling Numba kernels for the first time; later runs load them from %s", directory)
    else:
        log.info("compiling Numba kernels (in memory: each process compiles them again)")


def _since(start: float) -> float:
    return time.perf_counter() - start


def _sig(sig) -> str:
    return "(" + ", ".join(str(t) for t in sig) + ")" if isinstance(sig, tuple) else f"({sig})"


def kind_source(template: str, kind: str, words: dict) -> str:
    """A compiled module's loops written once for both float kinds, for ``kind`` (``"f32"`` or ``"f64"``): each
    ``KIND`` in ``template`` (a name's suffix: ``forward_KIND``) becomes ``kind``, and each whole word that is a
    key of ``words`` (``DTYPE``, ``BYTES``, ...) its value."""
    text = template.replace("KIND", kind)
    return re.sub(r"\b(" + "|".join(words) + r")\b", lambda match: words[match.group(1)], text)


def address_intrinsic():
    """A Numba intrinsic ``at(address)``: the integer ``address`` as a ``void *``, which ``numba.carray`` turns
    into an array. ``row_products.share_<kind>`` receives its operands' addresses as integers; a row-walk loop
    (``_map_kernel``'s ``w``) views each row of a strided operand as a contiguous array from its first element's
    address, so that LLVM vectorizes the loop along it."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    def codegen_at(context, builder, signature, args):
        return builder.inttoptr(args[0], ir.IntType(8).as_pointer())

    def typer(typingctx, address):
        return types.voidptr(types.intp), codegen_at

    return intrinsic(typer)


#: What a kernel with a row-walked operand (``w``) imports: ``numba.carray`` and the address intrinsic.
_ROW_WALK_IMPORTS = (
    "from numba import carray as _carray\n"
    "from numbagrad.backend.codegen import address_intrinsic as _address_intrinsic\n\n"
    "_at = _address_intrinsic()\n\n\n"
)


# --- kernel families ----------------------------------------------------------------------------------------
def _element(arg: str, kind: str, index: str = "i") -> str:
    """An operand inside a loop: an array read per element (``a``), a one-element array (``o``), a scalar
    (``s``); in a row-broadcast loop (``_map_kernel``) also a row ``r`` (read at the column ``_j``), a column
    ``c`` (read at the row ``i``) and a row-walked array ``w`` (its row ``i``, contiguous, read at ``_j``); in a
    loop over collapsed dims, a mask of ``0``/``1`` flags (``flat_offset``); in a loop nest over strided arrays
    (``strided_pattern``), an ``n`` read at the nest's indices ``i, _j1, ...``."""
    if kind[0] in "01":
        return f"{arg}[{flat_offset(tuple(f == '1' for f in kind))}]"
    return {"a": f"{arg}[{index}]", "o": f"{arg}[0]", "s": arg, "r": f"{arg}[_j]", "c": f"{arg}[i]",
            "n": f"{arg}[{index}]", "w": f"{arg}_row[_j]"}[kind]  # fmt: skip


def flat_offset(mask: tuple) -> str:
    """The element an operand with ``mask`` (per collapsed dim: True where it is full, ``layout.collapse``)
    reads at loop indices ``_j0, _j1, ...`` over sizes ``d0, d1, ...``: its C-contiguous storage has, in each
    full dim, the stride of the product of the later full dims, and stride 0 in the others."""
    terms = [f"_j{k}" if dim_stride(mask, k) == "1" else f"_j{k}*{dim_stride(mask, k)}" for k in range(len(mask))]
    terms = [t for t, full in zip(terms, mask) if full]
    return "(" + "+".join(terms) + ")" if terms else "0"


def dim_stride(mask: tuple, k: int) -> str:
    """The stride (an expression over the sizes ``d0, d1, ...``) of collapsed dim ``k`` in the C-contiguous
    storage of an operand with ``mask``: the product of the later dims it is full in."""
    later = [f"d{m}" for m in range(k + 1, len(mask)) if mask[m]]
    return "*".join(later) if later else "1"


def unravel(rank: int, flat: str = "i") -> list[str]:
    """Statements splitting the flat index ``flat`` over sizes ``d0, d1, ...`` into ``_j0, _j1, ...`` (the
    index of a grid-stride loop over collapsed dims)."""
    if rank == 1:
        return [f"_j0 = {flat}"]
    lines = [f"_t = {flat}"]
    for k in range(rank - 1, 0, -1):
        lines += [f"_j{k} = _t % d{k}", f"_t = _t // d{k}"]
    return [*lines, "_j0 = _t"]


def pattern_tokens(pattern: str) -> list[str]:
    """One kind per operand: a pattern's characters, or its ``_``-joined tokens when it holds masks
    (``layout.Space.mask_pattern``), or the kinds before the rank of a strided pattern (``strided_pattern``)."""
    if "@" in pattern:
        return list(pattern.split("@")[0])
    return pattern.split("_") if "_" in pattern else list(pattern)


def strided_pattern(kinds: str, rank: int) -> str:
    """The pattern of a loop nest of ``rank`` dims over strided arrays (``layout.strided_loop``): ``kinds`` has an
    ``n`` per array operand (an array of ``rank`` dims with any strides, 0 along a broadcast dim, read at the
    nest's indices) and an ``s`` per number; the results are such arrays too. One kernel per rank and kinds
    serves every shape, stride and broadcast."""
    return f"{kinds}@{rank}"


def strided_rank(pattern: str) -> int:
    """The rank of a strided pattern's loop nest (``strided_pattern``); 0 for any other pattern."""
    return int(pattern.split("@")[1]) if "@" in pattern else 0


def row_function(row: Row, which: str):
    """The scalar function a row kernel calls: ``which`` is ``"forward"`` or ``"grad<i>"``."""
    return row.forward if which == "forward" else row.grads[int(which[4:])]


def _float32_dispatch(calls: Sequence[Callable]) -> str:
    """For each called function ``f``, a stub ``f_any`` that Numba resolves while it types the kernel: to the
    float32 twin ``f_f32`` (``vector_math.single_precision``) when every argument is a float32, else to ``f``. One
    kernel source then serves both dtypes, and the backend's kernel lookup stays the same."""
    parts = ["from numba import float32 as _float32\nfrom numba.extending import overload as _overload"]
    for f in calls:
        name = f.__name__
        args = ", ".join(f.__code__.co_varnames[: f.__code__.co_argcount])
        parts.append(
            f"def {name}_any({args}):\n    pass\n\n\n"
            f"@_overload({name}_any, inline='always')\n"
            f"def _{name}_any({args}):\n"
            f"    if all(a == _float32 for a in ({args},)):\n"
            f"        return lambda {args}: {name}_f32({args})\n"
            f"    return lambda {args}: {name}({args})\n"
        )
    return "\n\n".join(parts)


def _map_kernel(tag: str, target: str, fns: Sequence[Callable], fn, operands, pattern: str, params, into=None,
                single: bool = False, fix_up: bool = False, vector: bool = True):  # fmt: skip
    """``res[i] = fn(operands..., params...)``: from a file when ``fns`` can be copied, else in memory. A tuple
    ``fn`` computes one result array per function in the same pass (``res0``, ``res1``, ...); every value is
    computed before any is stored. ``into`` names the operand the last result is written into, in place of a
    result argument: LLVM then sees one buffer read and written at the same index and vectorizes the loop (a
    result argument that aliases an operand fails its run-time overlap check, and the loop ran scalar: 2.3x
    slower for a float32 ``mul`` backward at 1e5). ``single`` (CPU): float32 operands run the functions' float32
    twins (``_float32_dispatch``). A pattern with ``r`` (a row, broadcast down the rows), ``c`` (a column,
    broadcast along them) or ``w`` (an array whose rows are contiguous but lie any number of bytes apart: a slice
    of columns, ``chunk``'s parts, a channel slice) makes a loop over ``_outer`` rows of ``_inner`` elements, two
    more arguments, then one per ``w`` operand: its row stride in bytes, ``<name>_rs``. A ``w`` operand is passed
    as it is (any rank); each row is read as a contiguous array from its first element's address, so the loop
    along it vectorizes as the flat loop does (a strided nest's does not: ``sigmoid`` of a (64, 256) quarter of
    (64, 1024) took 88 us in one). A strided
    pattern (``strided_pattern``) makes a loop nest over arrays of its rank, results included, read and written
    through their own strides (no copy of a transposed or broadcast operand).

    ``fix_up`` (CPU, a row whose functions carry a nan from sin, cos, tan or fmod to their result): the loop calls
    the functions' fix-up twins (``vector_math.fix_up_twin``: vectorized, 3-10x faster than libm's), and a second
    loop computes each nan result again with the functions themselves (a sine's argument beyond 1e5, one next to a
    multiple of pi/2, a quotient beyond 4e15, or a nan of the data). Not with ``into``: the first loop would have
    overwritten an input.

    ``vector=False`` (CPU): the functions call libm's ``exp``, ``log`` and the others, not ``vector_math``'s."""
    fns = copyable(_unique(fns))
    portable = fns is not None
    single = single and portable and target in _CPU_TARGETS
    calls = fn if isinstance(fn, tuple) else (fn,)
    names = [c.__name__ for c in calls] if portable else [f"fn{k}" for k in range(len(calls))]
    fix_up = fix_up and portable and target in _CPU_TARGETS and into is None and not single
    exact_names = names
    if single:
        names = [f"{name}_any" for name in names]
    elif fix_up:
        names = [f"{name}_fast" for name in names]
    kinds = pattern_tokens(pattern)
    rank = max((len(k) for k in kinds if k[0] in "01"), default=0)  # a loop over collapsed dims d0, d1, ...
    nest = strided_rank(pattern)  # a loop nest over strided arrays, indices i, _j1, _j2, ...
    walked = [a for a, k in zip(operands, kinds) if k == "w"]  # (row-walked operands: each row contiguous)
    # a row-broadcast loop: rows i, columns _j, elements _k
    rows = not nest and ("r" in pattern or "c" in pattern or bool(walked))
    index = "_k" if rows else ", ".join(["i", *(f"_j{k}" for k in range(1, nest))]) if nest else "i"
    args = ", ".join([_element(a, k, index) for a, k in zip(operands, kinds)] + list(params))
    if len(calls) == 1 and into is None:
        results, stores = ["res"], ["res"]
    else:
        stores = [f"res{k}" for k in range(len(calls))]
        if into is not None:
            stores[-1] = into
        results = [r for r in stores if r != into]

    def element(names: list) -> str:  # the statements for one element
        if len(stores) == 1:
            return f"{stores[0]}[{index}] = {names[0]}({args})"
        return "\n".join([f"r{k} = {name}({args})" for k, name in enumerate(names)] +
                         [f"{name}[{index}] = r{k}" for k, name in enumerate(stores)])  # fmt: skip

    def each(body: str) -> str:  # over the columns of a row-broadcast loop's row i, or the inner dims of a nest
        if rows:
            # (a row-walked operand's row i: a contiguous array from its first element, ``_rs`` bytes apart)
            walk = "".join(f"{a}_row = _carray(_at({a}.ctypes.data + i * {a}_rs), (_inner,), {a}.dtype)\n"
                           for a in walked)  # fmt: skip
            return walk + "for _j in range(_inner):\n    _k = i * _inner + _j\n" + textwrap.indent(body, "    ")
        for k in range(nest - 1, 0, -1):
            body = f"for _j{k} in range({stores[0]}.shape[{k}]):\n" + textwrap.indent(body, "    ")
        return body

    body = each(element(names))
    walks_nest = nest >= 2 and target in _CPU_TARGETS
    if walks_nest:  # (its innermost loop along contiguous rows, when every array is contiguous along it)
        body = _nest_with_row_walk(body, nest, stores, operands, kinds, params, names)
    if rank:
        body = "\n".join([*unravel(rank), body])
    n = "_outer" if rows else f"{stores[0]}.shape[0]"
    fix_up_loop = ""
    if fix_up:
        nan = " or ".join(f"{s}[{index}] != {s}[{index}]" for s in stores)
        fix_up_loop = f"for i in {'prange' if target == 'parallel' else 'range'}({n}):\n" + textwrap.indent(
            each(f"if {nan}:\n" + textwrap.indent(element(exact_names), "    ")), "    "
        )
    if rows:
        strides = [f"{a}_rs" for a in walked]
        loop = loop_source(target, "kernel", [*results, *operands, *params, "_outer", "_inner", *strides], body, n,
                           epilogue=fix_up_loop)  # fmt: skip
        if walked:
            loop = _ROW_WALK_IMPORTS + loop
    elif walks_nest:
        loop = _ROW_WALK_IMPORTS + loop_source(target, "kernel", [*results, *operands, *params], body, n,
                                               epilogue=fix_up_loop)  # fmt: skip
    elif rank:
        sizes = [f"d{k}" for k in range(rank)]
        loop = loop_source(target, "kernel", [*results, *operands, *params, *sizes], body, n, epilogue=fix_up_loop)
    else:
        loop = loop_source(target, "kernel", [*results, *operands, *params], body, n, epilogue=fix_up_loop)
    if portable:
        # inlined at Numba IR level: LLVM then vectorizes the loop (a float32 call to a row function that uses
        # the vector math stayed a call, 8x slower), and each kernel compiles only the functions it uses
        functions = functions_source(fns, target, inline="always", vector=vector, single=fns if single else (),
                                     fix_up=fns if fix_up else ())  # fmt: skip
        if single:
            functions += "\n\n\n" + _float32_dispatch(calls)
        return load_module(tag, module_source(target, functions, loop)).kernel
    return exec_source(loop, target, tag, **dict(zip(names, calls)))["kernel"]


def _nest_with_row_walk(body: str, nest: int, stores: list, operands, kinds, params, names: list) -> str:
    """A CPU loop nest's ``body`` (its loops inside ``i``) as two versions: where every array steps one element
    along the innermost dim (``q.view(b, t, h, d).transpose(1, 2) * s``, ``x[:, None, :] * y``'s broadcast
    middle), that dim's run of each array is viewed as a contiguous array from its address (``address_intrinsic``),
    so LLVM vectorizes the innermost loop as it does a flat one; otherwise the nest as it is. ``nest`` is the rank
    (at least 2); arrays are the results ``stores`` and the ``n`` operands."""
    last = nest - 1
    arrays = list(dict.fromkeys([*stores, *[a for a, k in zip(operands, kinds) if k == "n"]]))
    unit = " and ".join(f"{a}.strides[{last}] == {a}.itemsize" for a in arrays)
    at = " + ".join(["i * {a}.strides[0]", *[f"_j{k} * {{a}}.strides[{k}]" for k in range(1, last)]])
    rows = "".join(
        f"{a}_row = _carray(_at({a}.ctypes.data + {at.format(a=a)}), ({stores[0]}.shape[{last}],), {a}.dtype)\n"
        for a in arrays
    )
    args = ", ".join([f"{a}_row[_j{last}]" if k == "n" else a for a, k in zip(operands, kinds)] + list(params))
    if len(stores) == 1:
        inner = f"{stores[0]}_row[_j{last}] = {names[0]}({args})"
    else:
        inner = "\n".join([f"r{k} = {name}({args})" for k, name in enumerate(names)] +
                           [f"{s}_row[_j{last}] = r{k}" for k, s in enumerate(stores)])  # fmt: skip
    walk = rows + f"for _j{last} in range({stores[0]}.shape[{last}]):\n" + textwrap.indent(inner, "    ")
    for k in range(last - 1, 0, -1):
        walk = f"for _j{k} in range({stores[0]}.shape[{k}]):\n" + textwrap.indent(walk, "    ")
    return f"if {unit}:\n" + textwrap.indent(walk, "    ") + "\nelse:\n" + textwrap.indent(body, "    ")


def _row_kernel(row: Row, which, pattern: str, target: str, into: str | None = None):
    """``which``: ``"forward"``, ``"grad<i>"``, or a tuple of input indices whose gradients one kernel computes;
    ``into``: the operand (``"x0"``, ``"g"``, ...) the (last) result is written into, which is then not a result
    argument (``_map_kernel``)."""
    operands = [f"x{i}" for i in range(row.arity)]
    if which != "forward":
        operands = ["g", "o", *operands]
    params = [f"p{i}" for i in range(len(row.params))]
    prefix = "cuda_" if target == "cuda" else ""
    suffix = "_par" if target == "parallel" else ""
    if isinstance(which, tuple):
        fn = tuple(row.grads[i] for i in which)
        which = "grads" + "".join(str(i) for i in which)
    else:
        fn = row_function(row, which)
    tag = f"{prefix}{row.name}_{which}_{pattern.replace('@', '_nd')}{suffix}{f'_into_{into}' if into else ''}"
    fns = [scalar_math.select, row.forward, *row.grads]
    return _map_kernel(tag, target, fns, fn, operands, pattern, params, into, row.float32_math, row.fix_up,
                       not row.libm)  # fmt: skip


def row_kernel(row: Row, which, pattern: str, target: str, into: str | None = None):
    """The kernel of one row from the one cache (``KERNELS``, key ``(row.name, which, pattern, target)``, plus
    ``into`` when given; row names are unique, user rows included): ``kernel(res, *operands, *params)`` for
    ``which`` ``"forward"``/``"grad<i>"``, or ``kernel(res0, res1, ..., *operands, *params)`` for a tuple of
    input indices. ``pattern``: per operand, ``a`` a flat array, ``s`` a scalar, ``o`` a one-element array, ``r``
    or ``c`` a row or column of a row-broadcast loop, or a mask token (``layout.Space``); or a strided pattern
    (``strided_pattern``: a loop nest whose results and array operands are views of its rank). ``target``:
    ``"serial"``, ``"parallel"`` (``prange``) or ``"cuda"`` (a grid-stride kernel). ``into`` names an array
    operand (``"x0"`` for an in-place op, ``"g"`` for a gradient written into its incoming buffer) that the last
    result goes into, so its result argument is left out."""
    key = (row.name, which, pattern, target) if into is None else (row.name, which, pattern, target, into)
    kernel = KERNELS.get(key)
    if kernel is None:
        kernel = KERNELS[key] = _row_kernel(row, which, pattern, target, into)
        if which == "forward" and target == "serial" and into is None:
            SERIAL_FORWARD.setdefault(row.name, {})[pattern] = kernel
    return kernel


def map_kernel(tag: str, fns: Sequence[Callable], fn: Callable, operands: Sequence[str], pattern: str,
               params: Sequence[str], target: str):  # fmt: skip
    """A map kernel over module-level scalar functions ``fns`` (``fn`` among them), e.g. ``where`` over
    ``select``: ``res[i] = fn(operands..., params...)``, memoized per tag, pattern and target."""
    key = ("map", tag, pattern, target)
    kernel = KERNELS.get(key)
    if kernel is None:
        name = f"{tag}_{pattern.replace('@', '_nd')}"
        kernel = KERNELS[key] = _map_kernel(name, target, fns, fn, operands, pattern, params)
    return kernel


def accumulate_kernel(target: str):
    """``kernel(dst, src)``: ``dst[i] += src[i]`` over flat arrays (the leaf ``.grad`` accumulation)."""
    key = ("accumulate", target)
    kernel = KERNELS.get(key)
    if kernel is None:
        loop = loop_source(target, "kernel", ["dst", "src"], "dst[i] += src[i]", "dst.shape[0]")
        kernel = KERNELS[key] = load_module(f"accumulate_{target}", module_source(target, loop)).kernel
    return kernel


#: A float sum adds blocks of this many elements in the input's own dtype (one register per vector lane, each lane
#: adding 16 of them once the loop is vectorized), and each block's total into a float64 one: a float32 sum streams
#: at float32 width (1e5 elements: 3.9 us, against 7.3 us converting every element to float64; torch 5.3) and stays
#: within a few ulp of the exact sum, as torch's cascade sum does.
SUM_BLOCK = 1024


def _add_block(view: str, total: str) -> str:
    """Loop text adding the 1-d slice ``view`` (at most ``SUM_BLOCK`` elements) into the float64 ``total``: the
    slice's own sum in ``zero``'s dtype first, a loop LLVM vectorizes with one accumulator per lane."""
    return f"v = {view}\nacc = zero\nfor j in range(v.shape[0]):\n    acc += v[j]\n{total} += acc\n"


def sum_kernel(target: str):
    """``kernel(x, zero)``: the float64 ``sum(x)`` over a flat array, block by block (``SUM_BLOCK``), each block
    added in ``zero``'s dtype (the input's), their totals in float64."""
    key = ("sum", target)
    kernel = KERNELS.get(key)
    if kernel is None:
        body = _add_block(f"x[i * {SUM_BLOCK} : (i + 1) * {SUM_BLOCK}]", "total")
        blocks = f"(x.shape[0] + {SUM_BLOCK - 1}) // {SUM_BLOCK}"
        loop = loop_source(target, "kernel", ["x", "zero"], body, blocks, reduce=(("total", "+"),),
                           epilogue="return total")  # fmt: skip
        kernel = KERNELS[key] = load_module(f"sum_{target}", module_source(target, loop)).kernel
    return kernel


#: A sum over a middle axis adds this many rows at a time into a row of the input's dtype, then that row into the
#: float64 result (each element of the row adds up to 32 values in float32, as a lane of ``SUM_BLOCK``'s does).
SUM_ROWS = 32

_SUM_AXIS = {
    # (outer, n) -> (outer,): each row block by block, as the whole-array sum
    "rows": f"""
total = 0.0
for start in range(0, x.shape[1], {SUM_BLOCK}):
{_indent(_add_block(f"x[i, start : start + {SUM_BLOCK}]", "total"), 4)}out[i, 0] = total
""",
    # (outer, n, inner) -> (outer, inner): SUM_ROWS rows at a time added into ``acc`` (row i of ``scratch``, in the
    # input's dtype) along the contiguous inner axis, then ``acc`` into the float64 result
    "middle": f"""
    for j in range(x.shape[2]):
        out[i, j] = 0.0
    acc = scratch[i]
    for start in range(0, x.shape[1], {SUM_ROWS}):
        for j in range(x.shape[2]):
            acc[j] = zero
        for k in range(start, min(start + {SUM_ROWS}, x.shape[1])):
            for j in range(x.shape[2]):
                acc[j] += x[i, k, j]
        for j in range(x.shape[2]):
            out[i, j] += acc[j]
""",
}


def sum_axis_kernel(kind: str, target: str):
    """``kernel(x, out, scratch, zero)``: the sums over the middle axis of a C-contiguous ``x`` viewed as
    ``(outer, n)`` (``kind="rows"``, which ignores ``scratch``) or ``(outer, n, inner)`` (``"middle"``, which adds
    into ``scratch``, an ``(outer, inner)`` array of the input's dtype), into the float64 ``out`` of shape
    ``(outer, 1)`` or ``(outer, inner)``, added in ``zero``'s dtype (the input's) first, as in ``sum_kernel``.
    Float32, 1 thread: a ``sum(1)`` of a (256, 400) array takes 10 us so (torch 6), against 25 us through numpy's
    pairwise loop and 14 us adding in float64; a ``sum(0)`` 10 us against 15 (torch 8), of a (1024, 1024) array
    72 us against 92 (torch 342).
    """
    key = ("sum_axis", kind, target)
    kernel = KERNELS.get(key)
    if kernel is None:
        args = ["x", "out", "scratch", "zero"]
        loop = loop_source(target, "kernel", args, _SUM_AXIS[kind], "x.shape[0]", reassociate=True)
        kernel = KERNELS[key] = load_module(f"sum_{kind}_{target}", module_source(target, loop)).kernel
    return kernel


def foreach_kernel(update: Callable, n_arrays: int, n_scalars: int, target: str, static: tuple = ()):
    """``kernel(*arrays, *scalars)`` calling ``update(i, *arrays, *scalars, *static)`` for every ``i`` of the
    first array: the fused in-place update of an optimizer step, from one module-level per-element function.

    ``static`` values (bools, ints) are written into the loop as literals, one kernel per combination: a flag
    that decides whether an array is written (Adam's ``amsgrad``) keeps the loop from vectorising when it is
    read at run time (measured: Adam at 1e5 float32 elements, 373 us with a run-time flag, 43 us with a literal).
    """
    update = getattr(update, "__func__", update)
    key = ("foreach", update, n_arrays, n_scalars, target, static)
    kernel = KERNELS.get(key)
    if kernel is None:
        if not all(type(v) in (bool, int) for v in static):
            raise TypeError(f"foreach: static values must be bools or ints, got {static!r}")
        names = [f"a{j}" for j in range(n_arrays)] + [f"s{j}" for j in range(n_scalars)]
        fns = copyable([update])
        call = update.__name__ if fns else "update"
        body = f"{call}(i, {', '.join(names + [repr(v) for v in static])})"
        loop = loop_source(target, "kernel", names, body, "a0.shape[0]")
        flags = "".join(str(int(v)) for v in static)
        if fns:
            functions = functions_source(fns, target, inline="always")
            tag = f"foreach_{update.__name__}_{target}{'_' + flags if flags else ''}"
            kernel = load_module(tag, module_source(target, functions, loop)).kernel
        else:
            kernel = exec_source(loop, target, f"foreach_{target}", update=update)["kernel"]
        KERNELS[key] = kernel
    return kernel


def apply_kernel(fn: Callable, arity: int, target: str, as_double: bool = False):
    """``kernel(res, *others)``: ``res[i] = fn(res[i], others[0][i], ...)`` (``apply_`` with arity 1,
    ``map_`` with 2). A module-level ``def`` is copied into a cached file; other callables compile per process.
    Not memoized here (``ops.apply`` memoizes per callable and dtype).

    ``as_double`` (for float arrays) passes every element to ``fn`` as a float64, as torch passes Python floats:
    Numba would otherwise compute ``a * b`` or ``math.sin(v)`` of float32 elements in float32 and round them
    there, where torch rounds only the float64 result. The float32 loop still vectorizes (whole vectors widened,
    computed in double, narrowed); the two conversions per element are most of its cost, as they share the
    floating-point add pipes (``v * 2 + 1`` over 1e5 float32 elements: 18 us against 8.5 us in float64, 1 thread,
    Zen 4). LLVM computes in float32 by itself where that rounds the same, a single operation like ``v * 2``."""
    operands = [f"y{j}" for j in range(1, arity)]
    fns = copyable([fn])
    args = ["res[i]", *[f"{o}[i]" for o in operands]]
    if as_double:  # (Numba's ``float(x)`` keeps a float32 a float32; a product with 1.0 is exact and float64)
        args = [f"1.0 * {a}" for a in args]
    body = f"res[i] = {fn.__name__ if fns else 'fn'}({', '.join(args)})"
    loop = loop_source(target, "kernel", ["res", *operands], body, "res.shape[0]")
    if fns:
        tag = f"apply_{fn.__name__}_{target}"
        return load_module(tag, module_source(target, functions_source(fns, target), loop)).kernel
    return exec_source(loop, target, f"apply_{target}", fn=fn)["kernel"]
