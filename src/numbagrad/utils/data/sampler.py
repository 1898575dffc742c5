"""Samplers: which dataset indices a DataLoader visits, in what order, and how they are grouped into batches.

Random samplers draw from a ``numbagrad.Generator`` (torch's mt19937 engine), so with ``generator=`` seeded like a
``torch.Generator`` they visit exactly torch's indices. Without one, each pass seeds a fresh Generator from
numbagrad's global generator, as torch does from its own: reproducible after ``numbagrad.manual_seed``, but a
different stream from torch's.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any, Generic, TypeVar

import numpy as np

from ..._generator import Generator, _default_seed_generator

__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]

T_co = TypeVar("T_co", covariant=True)


class Sampler(Generic[T_co]):
    """Base class: subclasses implement ``__iter__`` over indices (or index lists), and ``__len__`` if known."""

    def __init__(self, data_source: Sized | None = None) -> None:
        """``data_source`` is accepted for compatibility and ignored, as in torch."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError


class SequentialSampler(Sampler[int]):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


def _check_generator(generator) -> None:
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be a numbagrad.Generator, but got {type(generator).__module__}."
                        f"{type(generator).__qualname__}")  # fmt: skip


def _generator_for(generator: Generator | None) -> Generator:
    if generator is None:
        return _default_seed_generator()
    _check_generator(generator)
    return generator


class RandomSampler(Sampler[int]):
    """A random permutation per pass (or ``num_samples`` draws with ``replacement``), torch's draws exactly."""

    def __init__(self, data_source: Sized, replacement: bool = False, num_samples: int | None = None,
                 generator: Generator | None = None) -> None:  # fmt: skip
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        """How many indices one pass draws (the dataset's length unless given)."""
        if self._num_samples is None:
            return len(self.data_source)
        return self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        generator = _generator_for(self.generator)
        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from generator._randint(n, 32).tolist()
            yield from generator._randint(n, self.num_samples % 32).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from generator._randperm(n)
            yield from generator._randperm(n)[: self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given indices in random order (torch's permutation for the same generator seed)."""

    def __init__(self, indices: Sequence[int], generator: Generator | None = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in _generator_for(self.generator)._randperm(len(self.indices)):
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``.

    Drawn with numpy from a seed the generator provides: reproducible, but not torch's ``multinomial`` stream.
    """

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator: Generator | None = None) -> None:  # fmt: skip
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        w = np.asarray(weights._host() if hasattr(weights, "_host") else weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(w.shape)}")
        self.weights = w
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        rng = np.random.default_rng(_generator_for(self.generator)._random_int64())
        if not self.replacement and self.num_samples > np.count_nonzero(self.weights):
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
        picks = rng.choice(len(self.weights), self.num_samples, self.replacement, self.weights / self.weights.sum())
        yield from picks.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """Groups another sampler's indices into lists of ``batch_size`` (the last one shorter unless ``drop_last``)."""

    def __init__(self, sampler: Sampler[int] | Iterable[int], batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        sampler_iter = iter(self.sampler)
        if self.drop_last:
            yield from ([*batch] for batch in zip(*[sampler_iter] * self.batch_size))
        else:
            batch = [*itertools.islice(sampler_iter, self.batch_size)]
            while batch:
                yield batch
                batch = [*itertools.islice(sampler_iter, self.batch_size)]

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.sampler) // self.batch_size  # type: ignore[arg-type]
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size  # type: ignore[arg-type]


class _InfiniteConstantSampler(Sampler[Any]):
    """What an IterableDataset's loader iterates: None forever (the dataset decides when to stop)."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None
