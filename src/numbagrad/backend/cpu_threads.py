"""Independent tasks of one CPU primitive (the sample chunks of a convolution, the planes of a pool) run on as
many threads as numpy's matrix products use, the calling thread included.

Why not let OpenBLAS thread each product: a convolution makes one small product per sample (the cnn's 64 of
(64, 288) by (288, 576)), and OpenBLAS splits each evenly between its threads, so every product waits for the
slower half; on a shared machine a thread that loses its core for a few milliseconds holds up each of them. Here
each task runs wholly on one thread (OpenBLAS set to one thread while tasks run: its count is process-wide) and
idle threads take the next task, so a busy core costs only the tasks it does not run. The Numba kernels release
the GIL (``nogil``) and so do numpy's products, so the threads run at once.

The tasks a primitive makes depend on its shapes and the thread count alone, never on which thread ran what:
results are the same bits from run to run (on one thread, a primitive makes one task).
"""

from __future__ import annotations

import builtins
import itertools
import os
import threading
from collections.abc import Callable

import numpy as np


class OpenBLAS:
    """The thread-count functions of the OpenBLAS numpy's wheels bundle (in ``numpy.libs``): numpy itself offers
    no way to set them."""

    _PREFIXES = ("scipy_openblas_", "openblas_")
    _SUFFIXES = ("64_", "_64_", "")

    def __init__(self, library) -> None:
        self._set = self._find(library, "set_num_threads")
        self._get = self._find(library, "get_num_threads")

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
        self._set(builtins.int(n))

    def get_num_threads(self) -> int:
        return builtins.int(self._get())


_openblas_cache: list = []


def openblas() -> OpenBLAS | None:
    """numpy's bundled OpenBLAS (already loaded by numpy; opening it again returns the same library), or None
    where numpy links another BLAS."""
    if not _openblas_cache:
        import ctypes  # (lazy: only thread counts need it)
        from pathlib import Path

        found = None
        for path in sorted((Path(np.__file__).parent.parent / "numpy.libs").glob("*openblas*")):
            blas = OpenBLAS(ctypes.CDLL(str(path)))
            if blas.usable:
                found = blas
                break
        _openblas_cache.append(found)
    return _openblas_cache[0]


def thread_count() -> int:
    """The threads tasks run on: numpy's OpenBLAS's count (``OPENBLAS_NUM_THREADS``, ``set_num_threads``); one
    where the BLAS is another (it cannot be told to run products on one thread) or while tasks run."""
    blas = openblas()
    return 1 if blas is None else blas.get_num_threads()


_state = threading.local()  # ``in_task``: this thread is running a task (tasks it starts run where they are)
_pool: list = [None, 0, 0]  # the executor, its worker count, the process that made it
_blas_lock = threading.Lock()
_blas_saved = [0, 0]  # callers running tasks now, OpenBLAS's thread count before the first of them


def _start_worker() -> None:
    _state.in_task = True


def _blas_single(enter: bool) -> None:
    """OpenBLAS on one thread from the first caller running tasks to the last (callers in several threads of the
    user's at once share the change)."""
    blas = openblas()
    with _blas_lock:
        if enter:
            if _blas_saved[0] == 0:
                _blas_saved[1] = blas.get_num_threads()
                blas.set_num_threads(1)
            _blas_saved[0] += 1
        else:
            _blas_saved[0] -= 1
            if _blas_saved[0] == 0:
                blas.set_num_threads(_blas_saved[1])


def _executor(workers: int):
    """The helper threads (a ``ThreadPoolExecutor``), made on first use and again after a fork (a forked child has
    none of its parent's threads) or when more are wanted."""
    pool, size, pid = _pool
    if pool is None or size < workers or pid != os.getpid():
        from concurrent.futures import ThreadPoolExecutor  # (lazy: 2 ms of import numbagrad otherwise)

        if pool is not None and pid == os.getpid():
            pool.shutdown(wait=False)
        pool = ThreadPoolExecutor(workers, thread_name_prefix="numbagrad-cpu", initializer=_start_worker)
        _pool[:] = [pool, workers, os.getpid()]
    return pool


def run_tasks(task: Callable[[int], None], count: int) -> None:
    """``task(i)`` for each ``i`` in ``range(count)``, on up to ``thread_count()`` threads: the caller's and
    helpers that each take the next undone ``i`` until none is left. Returns when all are done; the first
    exception a task raised is raised here. Tasks write disjoint results: nothing is locked for them."""
    available = thread_count() if count > 1 and not getattr(_state, "in_task", False) else 1
    threads = min(count, available)
    if threads <= 1:
        for i in range(count):
            task(i)
        return
    counter = itertools.count()  # (``next`` on it is atomic under the GIL)

    def drain() -> None:
        i = next(counter)
        while i < count:
            task(i)
            i = next(counter)

    futures = []
    _blas_single(True)
    try:
        pool = _executor(available - 1)
        futures = [pool.submit(drain) for _ in range(threads - 1)]
        _state.in_task = True
        drain()
    finally:
        _state.in_task = False
        for future in futures:  # (the helpers use the caller's buffers: wait for them even after an error)
            future.exception()
        _blas_single(False)
    for future in futures:
        future.result()
