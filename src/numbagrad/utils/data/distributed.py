"""``DistributedSampler``: each of ``num_replicas`` processes visits its own shard of the dataset.

Indices are padded by repeating the first ones until they divide evenly (or trimmed with ``drop_last``), then rank
``r`` takes every ``num_replicas``-th index starting at ``r``. With ``shuffle``, the permutation is drawn from a
``numbagrad.Generator`` seeded with ``seed + epoch``: the same permutation torch's sampler draws, so shards match
torch's for every seed and epoch. Call ``set_epoch`` at the start of each epoch to reshuffle.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from ... import distributed
from ..._generator import Generator
from .dataset import Dataset
from .sampler import Sampler

__all__ = ["DistributedSampler"]


def _distributed():
    """``numbagrad.distributed`` if it can be used here (mpi4py installed)."""
    return distributed if distributed.is_available() else None


class DistributedSampler(Sampler[int]):
    """Restricts loading to this rank's shard; ``num_replicas``/``rank`` default to the process group's."""

    def __init__(self, dataset: Dataset, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:  # fmt: skip
        if num_replicas is None:
            dist = _distributed()
            if dist is None:
                raise RuntimeError("Requires distributed package to be available")
            num_replicas = dist.get_world_size()
        if rank is None:
            dist = _distributed()
            if dist is None:
                raise RuntimeError("Requires distributed package to be available")
            rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(self.dataset)  # type: ignore[arg-type]
        if self.drop_last and n % self.num_replicas != 0:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)  # type: ignore[arg-type]
        if self.shuffle:
            indices = Generator().manual_seed(self.seed + self.epoch)._randperm(n)
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding_size = self.total_size - len(indices)
            if padding_size <= len(indices):
                indices += indices[:padding_size]
            else:
                indices += (indices * math.ceil(padding_size / len(indices)))[:padding_size]
        else:
            indices = indices[: self.total_size]
        if len(indices) != self.total_size:
            raise AssertionError(f"Number of indices ({len(indices)}) does not match total_size ({self.total_size})")
        indices = indices[self.rank : self.total_size : self.num_replicas]
        if len(indices) != self.num_samples:
            raise AssertionError(
                f"Number of subsampled indices ({len(indices)}) does not match num_samples ({self.num_samples})"
            )
        return iter(indices)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle for this epoch (every rank must pass the same epoch)."""
        self.epoch = epoch
