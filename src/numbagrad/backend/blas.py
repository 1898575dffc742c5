"""numpy's BLAS as numbagrad needs to know it: the thread-count functions of the OpenBLAS numpy's wheels bundle
(``numbagrad.set_num_threads`` sets them; the CPU backend reads them to choose between BLAS and its own
one-thread kernels) and its worker threads (``cpu_threads`` runs tasks on them). numpy itself offers no way to
reach them."""

from __future__ import annotations

import numpy as np


class _OpenBLAS:
    """The thread-count functions of the OpenBLAS numpy's wheels bundle (in ``numpy.libs``): numpy itself offers
    no way to set them."""

    _PREFIXES = ("scipy_openblas_", "openblas_")
    _SUFFIXES = ("64_", "_64_", "")

    def __init__(self, library) -> None:
        self._set = self._find(library, "set_num_threads")
        self._get = self._find(library, "get_num_threads")
        self._run = getattr(library, "gotoblas_pthread", None)  # (threads, void f(void *), args, args' stride)

    def _find(self, library, name: str):
        for prefix in self._PREFIXES:
            for suffix in self._SUFFIXES:
                function = getattr(library, prefix + name + suffix, None)
                if function is not None:
                    return function
        return None

    @property
    def usable(self) -> bool:
        return self._set is not None and self._get is not None

    def set_num_threads(self, n: int) -> None:
        self._set(int(n))

    def get_num_threads(self) -> int:
        return int(self._get())

    @property
    def runs_tasks(self) -> bool:
        """Can ``run_on_threads`` hand work to OpenBLAS's worker threads (``cpu_threads``)?"""
        return self._run is not None

    def run_on_threads(self, threads: int, callback, args: int | None = None, stride: int = 0) -> None:
        """Call ``callback`` (a ctypes function, or the address of a compiled one, taking one pointer) once on
        each of ``threads`` threads, the caller's first and OpenBLAS's workers, the ``i``-th call with the pointer
        ``args + i * stride``, and return when all calls have."""
        import ctypes  # (lazy: only tasks need it)

        function = ctypes.c_void_p(callback) if isinstance(callback, int) else callback
        self._run(ctypes.c_int(threads), function, ctypes.c_void_p(args), ctypes.c_int(stride))


_found: list = []


def openblas() -> _OpenBLAS | None:
    """numpy's bundled OpenBLAS (already loaded by numpy; opening it again returns the same library), or None
    where numpy links another BLAS."""
    if not _found:
        import ctypes  # (lazy: only thread counts need it)
        from pathlib import Path

        found = None
        for path in sorted((Path(np.__file__).parent.parent / "numpy.libs").glob("*openblas*")):
            blas = _OpenBLAS(ctypes.CDLL(str(path)))
            if blas.usable:
                found = blas
                break
        _found.append(found)
    return _found[0]
