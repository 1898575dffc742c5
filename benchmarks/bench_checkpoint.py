"""Activation memory of a 16-layer MLP (width 512, batch 256) trained one step with and without checkpointing in 4
segments (``utils.checkpoint.checkpoint_sequential``, both forms), measured with tracemalloc: what is still
allocated after the forward (the activations kept for backward), and the peak of memory allocated between the
start of the forward and the end of the backward. The parameters' ``.grad`` buffers exist before the step
(``zero_grad(set_to_none=False)``), so neither number counts them; the input requires grad, as the reentrant
form needs for the segments' parameters to get gradients.

    PYTHONPATH=src python benchmarks/bench_checkpoint.py
"""

from __future__ import annotations

import time
import tracemalloc

import numbagrad
from numbagrad import nn
from numbagrad.utils.checkpoint import checkpoint_sequential

LAYERS, WIDTH, BATCH, SEGMENTS = 16, 512, 256, 4


def model() -> nn.Sequential:
    numbagrad.manual_seed(0)
    layers = []
    for _ in range(LAYERS):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    return nn.Sequential(*layers)


def step(net: nn.Sequential, x, mode: str) -> tuple[float, float, float]:
    """(MiB kept after the forward, peak MiB through the backward, seconds) of one forward and backward."""
    net.zero_grad(set_to_none=False)
    tracemalloc.start()
    start = time.perf_counter()
    if mode == "plain":
        y = net(x)
    else:
        y = checkpoint_sequential(net, SEGMENTS, x, use_reentrant=(mode == "reentrant"))
    loss = y.square().mean()
    kept = tracemalloc.get_traced_memory()[0]
    loss.backward()
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return kept / 2**20, peak / 2**20, seconds


def main() -> None:
    net = model()
    x = numbagrad.randn(BATCH, WIDTH, requires_grad=True)
    step(net, x, "plain")  # compile and warm the kernels outside the measurement
    print(f"{LAYERS}-layer MLP, width {WIDTH}, batch {BATCH}, float32; checkpointed in {SEGMENTS} segments")
    print(f"{'mode':<16}{'kept after forward':>20}{'peak in step':>16}{'time':>10}")
    for mode in ("plain", "non-reentrant", "reentrant"):
        step(net, x, mode)
        kept, peak, seconds = step(net, x, mode)
        print(f"{mode:<16}{kept:>16.1f} MiB{peak:>12.1f} MiB{seconds * 1e3:>8.0f} ms")


if __name__ == "__main__":
    main()
