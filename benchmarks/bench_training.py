"""One training step (forward, backward, SGD step) of a 784-128-10 MLP on a batch of 64: numbagrad vs torch.

Run ``python benchmarks/bench_training.py``; it prints each library's median step time and the ratio
numbagrad/torch (target: at most 1.0). torch is optional: without it only numbagrad's time is printed.
The ``time_*`` functions are asv-style entry points.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

BATCH, SIZES = 64, (784, 128, 10)


def make_step(lib):
    """A closure running one training step of ``lib`` (numbagrad or torch) on fixed random data."""
    lib.manual_seed(0)
    nn = lib.nn
    model = nn.Sequential(nn.Linear(SIZES[0], SIZES[1]), nn.ReLU(), nn.Linear(SIZES[1], SIZES[2]))
    optimizer = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((BATCH, SIZES[0])), dtype=lib.float32)
    y = lib.tensor(rng.integers(0, SIZES[2], BATCH))

    def step() -> float:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return step


def median_seconds(step, repeats: int = 300, warmup: int = 30) -> float:
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


_numbagrad_step = None


def time_training_step_numbagrad() -> None:
    global _numbagrad_step
    if _numbagrad_step is None:
        import numbagrad

        _numbagrad_step = make_step(numbagrad)
    _numbagrad_step()


def main(repeats: int = 300) -> None:
    import numbagrad

    ng = median_seconds(make_step(numbagrad), repeats)
    print(f"numbagrad: {ng * 1e6:9.1f} us per step (median of {repeats})")
    try:
        import torch
    except ImportError:
        print("torch not installed: no comparison")
        return
    th = median_seconds(make_step(torch), repeats)
    print(f"torch:     {th * 1e6:9.1f} us per step (median of {repeats}, {torch.get_num_threads()} threads)")
    print(f"ratio numbagrad/torch: {ng / th:.2f}x")


if __name__ == "__main__":
    main()
