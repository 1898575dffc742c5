"""``numbagrad.cuda``: torch.cuda's few queries. Importing this module does not import numba.cuda; calling does."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from .._types import CUDA0
from ..backend import cuda_backend, cuda_memory


def is_available() -> bool:
    """True when cuda tensors can be created: a GPU with its driver, or Numba's simulator."""
    cuda = cuda_backend()
    return cuda.available()


def device_count() -> int:
    """How many GPUs numba.cuda sees (1 under the simulator, 0 without CUDA)."""
    cuda = cuda_backend()
    if not cuda.available():
        return 0
    return 1 if cuda.simulator() else len(cuda._nb().gpus)


def current_device() -> int:
    """The index of the current GPU: always 0 (numbagrad uses one GPU per process)."""
    return 0


def synchronize(device=None) -> None:
    """Wait for every kernel launched so far to finish (what timing code needs)."""
    cuda = cuda_backend()
    cuda.require()
    cuda.synchronize()


# --- memory: the caching allocator's statistics ----------------------------------------------------------------
def memory_allocated(device=None) -> int:
    """Bytes held by live cuda tensors, counted by the allocator's block sizes (as torch counts)."""
    return cuda_memory.POOL.allocated


def max_memory_allocated(device=None) -> int:
    """The peak of ``memory_allocated`` since the start or the last ``reset_peak_memory_stats``."""
    return cuda_memory.POOL.peak_allocated


def memory_reserved(device=None) -> int:
    """Bytes the allocator holds from the device: live blocks plus the cached free ones."""
    return cuda_memory.POOL.reserved


def max_memory_reserved(device=None) -> int:
    """The peak of ``memory_reserved`` since the start or the last ``reset_peak_memory_stats``."""
    return cuda_memory.POOL.peak_reserved


def empty_cache() -> None:
    """Give the cached free blocks back to the device, so other processes (or libraries) can use the memory."""
    cuda_memory.POOL.release_cached()


def reset_peak_memory_stats(device=None) -> None:
    """Restart the peaks of ``max_memory_allocated`` and ``max_memory_reserved`` from the current values."""
    cuda_memory.POOL.reset_peaks()


# --- streams and events -------------------------------------------------------------------------------------------
class Stream:
    """A CUDA stream (numba's), for synchronising with and recording events on.

    numbagrad launches every kernel on the default stream, so work queued "on" any stream runs in program order:
    the results are those of torch's stream semantics without the overlap. ``with numbagrad.cuda.stream(s):``
    makes ``s`` the ``current_stream()``."""

    def __init__(self, device=None, priority: int = 0, *, _numba_stream=None) -> None:
        cuda = cuda_backend()
        cuda.require()
        self.device = CUDA0
        self.priority = priority
        self._stream = _numba_stream if _numba_stream is not None else cuda.new_stream()

    def synchronize(self) -> None:
        """Wait until the work queued on this stream (every kernel launched so far) has finished."""
        cuda_backend().synchronize()

    def query(self) -> bool:
        """Whether all work queued so far has finished (after a synchronize it has)."""
        self.synchronize()
        return True

    def record_event(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new one if None) at this point of the stream's work; returns it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def wait_event(self, event: Event) -> None:
        """Make later work on this stream wait until ``event`` has happened."""
        event.wait(self)

    def wait_stream(self, stream: Stream) -> None:
        """Make later work on this stream wait for all work queued so far on ``stream``."""
        self.wait_event(stream.record_event())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other._stream is self._stream

    def __hash__(self) -> int:
        return id(self._stream)

    def __repr__(self) -> str:
        return f"<numbagrad.cuda.Stream device={self.device} cuda_stream={id(self._stream):#x}>"


class Event:
    """A CUDA event: a point in a stream's work to wait for or to time (``elapsed_time`` in milliseconds).

    On a GPU it is numba's event. Under the simulator kernels run synchronously on the host, so recording reads
    the host clock, which is then exactly when the work before it finished."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        cuda = cuda_backend()
        cuda.require()
        self.enable_timing = enable_timing
        self.blocking = blocking
        self.interprocess = interprocess
        self._event = None if cuda.simulator() else cuda.new_event(enable_timing)
        self._host_time: float | None = None

    def record(self, stream: Stream | None = None) -> None:
        """Mark this point of ``stream``'s work (the current stream by default)."""
        stream = current_stream() if stream is None else stream
        if self._event is None:
            self._host_time = time.perf_counter()
        else:
            self._event.record(stream._stream)
            self._host_time = 0.0

    def wait(self, stream: Stream | None = None) -> None:
        """Make later work on ``stream`` (the current one by default) wait until this event has happened."""
        if self._event is not None and self._host_time is not None:
            self._event.wait((current_stream() if stream is None else stream)._stream)

    def query(self) -> bool:
        """Whether the work before this event has finished (True for an event never recorded, as torch)."""
        if self._event is None or self._host_time is None:
            return True
        return bool(self._event.query())

    def synchronize(self) -> None:
        """Wait until the work before this event has finished."""
        if self._event is not None and self._host_time is not None:
            self._event.synchronize()

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds between this event's record and ``end_event``'s (both recorded, both timing)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._host_time is None or end_event._host_time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        if self._event is None:
            return (end_event._host_time - self._host_time) * 1000.0
        end_event.synchronize()
        return float(cuda_backend().event_elapsed_ms(self._event, end_event._event))

    def __repr__(self) -> str:
        return f"<numbagrad.cuda.Event {'recorded' if self._host_time is not None else 'unrecorded'}>"


_current: list[Stream] = []
_default: Stream | None = None


def default_stream(device=None) -> Stream:
    """The default stream, on which numbagrad launches its kernels."""
    global _default
    if _default is None:
        cuda = cuda_backend()
        cuda.require()
        _default = Stream(_numba_stream=cuda.default_stream())
    return _default


def current_stream(device=None) -> Stream:
    """The stream made current by the innermost ``stream(...)`` block, else the default stream."""
    return _current[-1] if _current else default_stream()


def set_stream(stream: Stream) -> None:
    """Make ``stream`` the current stream (outside any ``stream(...)`` block, until the next call)."""
    if _current:
        _current[-1] = stream
    else:
        _current.append(stream)


@contextlib.contextmanager
def stream(stream: Stream | None) -> Iterator[None]:
    """``with stream(s):`` makes ``s`` the current stream inside the block (``None`` changes nothing)."""
    if stream is None:
        yield
        return
    _current.append(stream)
    try:
        yield
    finally:
        _current.pop()


from . import amp  # noqa: E402 - torch.cuda.amp's deprecated spellings, which need the functions above

__all__ = [
    "Event",
    "Stream",
    "amp",
    "current_device",
    "current_stream",
    "default_stream",
    "device_count",
    "empty_cache",
    "is_available",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_reserved",
    "reset_peak_memory_stats",
    "set_stream",
    "stream",
    "synchronize",
]
