"""The caching allocator for cuda tensors: freed device blocks are kept per size class and handed out again, as
torch's CUDA caching allocator does, so a training step that allocates the same buffers every step stops calling
the driver after the first one.

One pool, two sources of raw blocks:

- on a GPU, the pool is Numba's External Memory Management plugin (``CachingMemoryManager``): every numba.cuda
  allocation (``device_array``, ``to_device``, the kernels' outputs) asks it for memory, and a block comes back to
  the pool when the last device array over it is collected;
- under Numba's simulator there is no driver, so ``simulator_array`` makes host blocks that stand in for device
  memory, with the same pool and statistics, so the accounting is tested in CI.

``numbagrad.cuda.memory_allocated()`` and its neighbours read ``POOL``.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

#: Blocks under 1 MiB are rounded up to 512 bytes; larger ones to 2 MiB, so that a pool of mixed sizes still
#: finds reuse (torch rounds the same way for its small and large pools).
_SMALL = 1 << 20
_SMALL_ROUND = 512
_LARGE_ROUND = 2 << 20


def size_class(nbytes: int) -> int:
    """The block size a request of ``nbytes`` is served from."""
    step = _SMALL_ROUND if nbytes < _SMALL else _LARGE_ROUND
    return max(step, -(-nbytes // step) * step)


class BlockPool:
    """Free blocks by size class, and the byte counts torch's memory statistics report.

    ``allocated`` counts the blocks handed out (by their size class, as torch counts), ``reserved`` those plus
    the cached free ones; the peaks are reset by ``reset_peaks``."""

    def __init__(self) -> None:
        self._free: dict[int, list] = {}
        self._lock = threading.Lock()
        self.allocated = 0
        self.reserved = 0
        self.peak_allocated = 0
        self.peak_reserved = 0

    def take(self, nbytes: int, allocate_raw):
        """A block of at least ``nbytes``: a cached one of its size class, else ``allocate_raw(size)``."""
        size = size_class(nbytes)
        with self._lock:
            blocks = self._free.get(size)
            block = blocks.pop() if blocks else None
        if block is None:
            block = allocate_raw(size)
            with self._lock:
                self.reserved += size
                self.peak_reserved = max(self.peak_reserved, self.reserved)
        with self._lock:
            self.allocated += size
            self.peak_allocated = max(self.peak_allocated, self.allocated)
        return size, block

    def give_back(self, size: int, block) -> None:
        """Return a block that nothing uses any more to its size class."""
        with self._lock:
            self.allocated -= size
            self._free.setdefault(size, []).append(block)

    def release_cached(self) -> None:
        """Drop every cached free block (``empty_cache``): the raw blocks' owners free them."""
        with self._lock:
            freed = sum(size * len(blocks) for size, blocks in self._free.items())
            self._free.clear()
            self.reserved -= freed

    def reset_peaks(self) -> None:
        with self._lock:
            self.peak_allocated = self.allocated
            self.peak_reserved = self.reserved


POOL = BlockPool()


# --- the simulator's blocks -----------------------------------------------------------------------------------
class _SimulatedBlock:
    """A host buffer standing in for one device block. numpy arrays made from it keep *this object* as their
    base (numpy collapses bases only through ndarrays), so the block returns to the pool when the last array or
    view over it is collected, exactly when a device block's last ``MemoryPointer`` would be."""

    def __init__(self, buffer: np.ndarray, size: int) -> None:
        self.__array_interface__ = buffer.__array_interface__
        self._buffer = buffer
        weakref.finalize(self, POOL.give_back, size, buffer)


def simulator_array(shape: tuple, dtype: np.dtype) -> np.ndarray:
    """A C-contiguous host array of ``shape`` and ``dtype`` over a pooled block (the simulator's storage)."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    size, buffer = POOL.take(max(count * dtype.itemsize, 1), lambda n: np.empty(n, np.uint8))
    raw = np.asarray(_SimulatedBlock(buffer, size))
    return raw[: count * dtype.itemsize].view(dtype).reshape(shape)


# --- the GPU's blocks: Numba's EMM plugin ----------------------------------------------------------------------
_manager_class = None


def memory_manager_class():
    """``CachingMemoryManager``: Numba's own device memory manager with ``memalloc`` served from ``POOL``. Built on
    first use, since it subclasses a class of numba.cuda's driver module."""
    global _manager_class
    if _manager_class is not None:
        return _manager_class
    from numba.cuda.cudadrv import driver

    class CachingMemoryManager(driver.NumbaCUDAMemoryManager):
        """Allocations come from ``POOL``; a block whose last user is gone goes back there, not to the driver.
        The raw block is an allocation of Numba's own manager, freed by Numba when the pool drops it."""

        def memalloc(self, size):
            block_size, raw = POOL.take(size, super().memalloc)
            ctx = weakref.proxy(self.context)
            pointer = driver.MemoryPointer(
                ctx, raw.device_pointer, size, finalizer=lambda: POOL.give_back(block_size, raw)
            )
            return pointer.own()

    _manager_class = CachingMemoryManager
    return _manager_class


def install(cuda) -> None:
    """Make ``CachingMemoryManager`` numba.cuda's memory manager. Contexts made afterwards use it; a context a
    program made before (it used numba.cuda before numbagrad) keeps Numba's default manager, and then the
    statistics count nothing. A Numba whose EMM interface version differs refuses the plugin (RuntimeError): its
    own manager serves then, uncached."""
    try:
        cuda.set_memory_manager(memory_manager_class())
    except RuntimeError:
        pass
