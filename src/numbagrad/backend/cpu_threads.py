"""Independent tasks of one CPU primitive (the sample spans of a convolution, the planes of a pool) run on
OpenBLAS's own threads, the calling thread included, as many as numpy's matrix products use.

Why not let OpenBLAS thread each product: a convolution makes one small product per sample (the cnn's 64 of
(64, 288) by (288, 576)) and OpenBLAS splits each between its threads, so every product waits for the slower half,
and the columns' Numba loops run on one thread meanwhile. Here each task (columns, products, column gradients)
runs wholly on one thread, OpenBLAS set to one thread while tasks run (its count is process-wide), and idle
threads take the next task, so a thread that loses its core costs only the tasks it does not run. The threads are
OpenBLAS's workers (``gotoblas_pthread``), not a pool of our own: after a threaded product a worker spins for a
while waiting for more, and a second pool's threads would compete with it for the cores (the cnn's step at 2
threads on a lightly loaded 2-core machine: 38 ms so, 65 with a Python thread pool, 47 with OpenBLAS threading
each product). The Numba kernels release the GIL (``nogil``) and so do numpy's products, so the threads run at
once; a task runs Python on a worker through a ctypes callback.

The tasks a primitive makes depend on its shapes and the thread count alone, never on which thread ran what:
results are the same bits from run to run (on one thread, a primitive makes one task).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

import numpy as np

from .blas import openblas


def thread_count() -> int:
    """The threads tasks run on: numpy's OpenBLAS's count (``OPENBLAS_NUM_THREADS``, ``set_num_threads``); one
    where the BLAS is another or cannot run tasks on its threads, and while tasks run."""
    blas = openblas()
    return 1 if blas is None or not blas.runs_tasks else blas.get_num_threads()


_state = threading.local()  # ``in_task``: this thread is running a task (tasks it starts run where they are)
_blas_lock = threading.Lock()
_blas_saved = [0, 0]  # callers running tasks now, OpenBLAS's thread count before the first of them
_callback_type: list = []  # the ctypes type of a task runner, made on first use


def _blas_single(enter: bool) -> None:
    """OpenBLAS on one thread from the first caller running tasks to the last (callers in several threads of the
    user's at once share the change): a product in a task runs on its thread, and never asks the workers, busy
    with tasks, for help."""
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


def run_tasks(task: Callable[[int], None], count: int) -> None:
    """``task(i)`` for each ``i`` in ``range(count)``, on up to ``thread_count()`` threads (the caller's and
    OpenBLAS's workers), each taking the next undone ``i`` until none is left. Returns when all are done; an
    exception a task raised stops the others taking more and is raised here. Tasks write disjoint results:
    nothing is locked for them."""
    available = thread_count() if count > 1 and not getattr(_state, "in_task", False) else 1
    threads = min(count, available)
    if threads <= 1:
        for i in range(count):
            task(i)
        return
    counter = itertools.count()  # (``next`` on it is atomic under the GIL)
    errors: list = []
    caller = threading.get_ident()

    def drain(_args) -> None:  # (called from C: an exception is kept for the caller, never raised into OpenBLAS)
        if threading.get_ident() != caller and not getattr(_state, "keeps_thread_state", False):
            _keep_thread_state()
        _state.in_task = True
        try:
            i = next(counter)
            while i < count and not errors:
                task(i)
                i = next(counter)
        except BaseException as error:  # noqa: BLE001 - raised again by run_tasks
            errors.append(error)
        finally:
            _state.in_task = False

    if not _callback_type:
        import ctypes  # (lazy: only tasks need it)

        _callback_type.append(ctypes.CFUNCTYPE(None, ctypes.c_void_p))
    callback = _callback_type[0](drain)
    _blas_single(True)
    try:
        openblas().run_on_threads(threads, callback)
    finally:
        _blas_single(False)
    if errors:
        raise errors[0]


def _keep_thread_state() -> None:
    """Keep this OpenBLAS worker's Python thread state from one task to the next. ctypes runs a callback on a
    thread Python did not start under a thread state made for the call and freed after it: 15-20 us a hand-off on
    two threads, the most of ``run_tasks``' cost (a task of nothing took 17-24 us, 3-4 once kept). One more
    ``PyGILState_Ensure``, never released, keeps it: ctypes' own release then only lets the GIL go. (The caller's
    thread, which runs Python already, has its own.)"""
    import ctypes  # (lazy: only tasks need it)

    _state.keeps_thread_state = True
    ctypes.pythonapi.PyGILState_Ensure()


def free_threads() -> int:
    """The threads a primitive may share work among now: ``thread_count()``, or one inside a task (the workers
    are busy with their own)."""
    return 1 if getattr(_state, "in_task", False) else thread_count()


def run_compiled(function: int, args) -> None:
    """Call the compiled C function at address ``function`` (``void f(void *)``, a Numba ``cfunc``) once for each
    row of the 2-D C-contiguous array ``args``, with a pointer to that row, each call on its own thread (the
    caller's and OpenBLAS's workers); ``len(args)`` must be at most ``free_threads()``. Unlike ``run_tasks``, no
    Python runs on the workers: the hand-off costs microseconds, not a callback's GIL round trip (an LSTM's
    per-step product shared so took 57 us against 95 on one thread; as Python tasks, more than on one)."""
    openblas().run_on_threads(len(args), function, args.ctypes.data, args.strides[0])


def run_compiled_shares(function: int, fields: np.ndarray, first: int, count: int, total: int, threads: int,
                        unit: int = 1) -> None:  # fmt: skip
    """``run_compiled`` over ``total`` items (slices, rows, samples) in ``threads`` contiguous shares of whole units
    of ``unit`` items (the last unit may be ragged), as even as they go: each share's row is the int64 row
    ``fields`` with its first item at index ``first`` and its count at ``count``. The shares depend on the shapes
    and the thread count alone."""
    bounds = share_bounds(total, threads, unit)
    shares = np.empty((threads, fields.size), np.int64)
    shares[:] = fields
    for i in range(threads):
        shares[i, first], shares[i, count] = bounds[i], bounds[i + 1] - bounds[i]
    run_compiled(function, shares)


def share_bounds(total: int, threads: int, unit: int = 1) -> list[int]:
    """Where each of ``threads`` contiguous shares of ``total`` items starts, then ``total``: whole units of
    ``unit`` items (the last unit may be ragged), as even as they go. They depend on the sizes and the thread count
    alone."""
    units = -(-total // unit)
    return [min(total, units * i // threads * unit) for i in range(threads + 1)]
