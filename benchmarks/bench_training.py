"""One training step (forward, backward, SGD step) of a 784-128-10 MLP on a batch of 64: numbagrad vs torch.

Run ``python benchmarks/bench_training.py``; it prints each library's median step time and the ratio
numbagrad/torch (target: at most 1.0). torch is optional: without it only numbagrad's time is printed.
``TrainingStep`` is the asv suite (models built in ``setup``).

On a shared machine, multi-threaded BLAS (numpy's and torch's) can wait milliseconds for a descheduled worker
thread; ``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_training.py`` gives both libraries one
thread and stable numbers.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

BATCH, SIZES = 64, (784, 128, 10)


def make_step(lib, dtype: str = "float32"):
    """A closure running one training step of ``lib`` (numbagrad or torch) on fixed random data, with the model
    and the input in ``dtype`` (a name both libraries have: ``float32``, ``bfloat16``)."""
    lib.manual_seed(0)
    nn = lib.nn
    model = nn.Sequential(nn.Linear(SIZES[0], SIZES[1]), nn.ReLU(), nn.Linear(SIZES[1], SIZES[2]))
    model.to(getattr(lib, dtype))
    optimizer = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((BATCH, SIZES[0])), dtype=getattr(lib, dtype))
    y = lib.tensor(rng.integers(0, SIZES[2], BATCH))

    def step() -> float:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return step


def median_seconds(steps: list, repeats: int = 300, warmup: int = 30) -> list[float]:
    """Median time of each step function; the functions alternate, so both see the same machine load."""
    for _ in range(warmup):
        for step in steps:
            step()
    times: list[list[float]] = [[] for _ in steps]
    for _ in range(repeats):
        for step, bucket in zip(steps, times):
            t0 = time.perf_counter()
            step()
            bucket.append(time.perf_counter() - t0)
    return [statistics.median(bucket) for bucket in times]


class TrainingStep:
    """asv: one training step of each library. ``setup`` builds the model, the optimizer and the data and runs a few
    warm-up steps (kernel compilation, first-step state), so the timing is the step alone, even with ``--quick``
    (one run, no asv warm-up). Cases for a library that is not installed are skipped."""

    params = ["numbagrad", "torch"]
    param_names = ["library"]

    def setup(self, library: str) -> None:
        import importlib

        try:
            lib = importlib.import_module(library)
        except ImportError:
            raise NotImplementedError(f"{library} is not installed") from None  # asv's skip
        self.step = make_step(lib)
        for _ in range(20):  # torch's first steps stay slow for a while (allocator and thread-pool warm-up)
            self.step()

    def time_training_step(self, library: str) -> None:
        self.step()


def main(repeats: int = 300) -> None:
    import numbagrad

    try:
        import torch
    except ImportError:
        (ng,) = median_seconds([make_step(numbagrad)], repeats)
        print(f"numbagrad: {ng * 1e6:9.1f} us per step (median of {repeats}); torch not installed: no comparison")
        return
    ng, th = median_seconds([make_step(numbagrad), make_step(torch)], repeats)
    print(f"numbagrad: {ng * 1e6:9.1f} us per step (median of {repeats})")
    print(f"torch:     {th * 1e6:9.1f} us per step (median of {repeats}, {torch.get_num_threads()} threads)")
    print(f"ratio numbagrad/torch: {ng / th:.2f}x")


if __name__ == "__main__":
    main()
