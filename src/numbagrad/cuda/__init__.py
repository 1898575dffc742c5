"""``numbagrad.cuda``: torch.cuda's few queries. Importing this module does not import numba.cuda; calling does."""

from __future__ import annotations

from ..backend import cuda_backend


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


from . import amp  # noqa: E402 - torch.cuda.amp's deprecated spellings, which need the functions above

__all__ = ["amp", "current_device", "device_count", "is_available", "synchronize"]
