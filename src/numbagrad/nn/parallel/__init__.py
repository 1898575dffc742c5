"""``numbagrad.nn.parallel``: ``DistributedDataParallel`` (data parallelism across MPI processes)."""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
