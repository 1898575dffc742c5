"""Shape-only ops against the elementwise fast path, and against torch, on a tiny float32 tensor that requires grad.

    python benchmarks/bench_shape_ops.py            # the table (1 thread), medians of interleaved repeats
    python benchmarks/bench_shape_ops.py --calls    # also the Python function calls (cProfile) per row

Per op two rows: ``fwd`` the op alone (the graph recorded), ``fwd+bwd`` the op then ``backward`` with a ready
gradient of the output's shape (so nothing but the op's node and the leaf's accumulation run). ``x * y`` and
``x.relu()`` are the reference: a shape-only op and its backward should cost less than they do. numbagrad and
torch alternate batch by batch (``compare.interleaved_medians``), so both see the same load on a shared machine;
the process-time columns (``time.process_time``) leave out the time other processes take the CPU away.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import interleaved_medians  # noqa: E402

SHAPE = (4, 8, 16)


def cases(lib) -> dict:
    """Label -> (forward, forward+backward) closures over fresh leaves of ``lib``."""
    gen = np.random.default_rng(0)
    x = lib.tensor(gen.standard_normal(SHAPE, dtype=np.float32), requires_grad=True)
    y = lib.tensor(gen.standard_normal(SHAPE, dtype=np.float32), requires_grad=True)
    xt = x.detach().transpose(1, 2).requires_grad_()  # (a leaf that is not contiguous)
    col = lib.tensor(gen.standard_normal((4, 8, 1), dtype=np.float32), requires_grad=True)
    ops = {
        "x * y": (lambda: x * y, x),
        "x.relu()": (lambda: x.relu(), x),
        "view(32, 16)": (lambda: x.view(32, 16), x),
        "reshape(32, 16)": (lambda: x.reshape(32, 16), x),
        "transpose(0, 2)": (lambda: x.transpose(0, 2), x),
        "permute(2, 0, 1)": (lambda: x.permute(2, 0, 1), x),
        "t() (2-D)": (None, x),
        "split(3, 2) (3 chunks)": (lambda: x.split(6, 2), x),
        "chunk(3, 2)": (lambda: x.chunk(3, 2), x),
        "unsqueeze(1)": (lambda: x.unsqueeze(1), x),
        "squeeze(2) (size 1)": (lambda: col.squeeze(2), col),
        "expand(4, 8, 16)": (lambda: col.expand(4, 8, 16), col),
        "flatten()": (lambda: x.flatten(), x),
        "narrow(1, 2, 3)": (lambda: x.narrow(1, 2, 3), x),
        "select(1, 2)": (lambda: x.select(1, 2), x),
        "x[:, 1:3]": (lambda: x[:, 1:3], x),
        "contiguous() of transposed": (lambda: xt.contiguous(), xt),
    }
    m = lib.tensor(gen.standard_normal((8, 16), dtype=np.float32), requires_grad=True)
    ops["t() (2-D)"] = (lambda: m.t(), m)
    out = {}
    for label, (fwd, leaf) in ops.items():
        sample = fwd()
        outs = sample if isinstance(sample, tuple) else (sample,)
        grads = tuple(lib.ones_like(o) for o in outs)

        def both(fwd=fwd, leaf=leaf, grads=grads):
            leaf.grad = None
            r = fwd()
            lib.autograd.backward(r if isinstance(r, tuple) else (r,), grads)

        out[label] = (fwd, both)
    return out


def measure(fns: list) -> tuple[list, list]:
    """Interleaved medians of wall time and of process time (seconds per call)."""
    wall = interleaved_medians(fns)
    clock = time.perf_counter
    try:
        time.perf_counter = time.process_time  # the same interleaving, read on the process clock
        cpu = interleaved_medians(fns)
    finally:
        time.perf_counter = clock
    return wall, cpu


def python_calls(fn, repeats: int = 200) -> float:
    import cProfile
    import pstats

    fn()
    fn()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(repeats):
        fn()
    profile.disable()
    return pstats.Stats(profile).total_calls / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", action="store_true", help="also count Python calls per row (cProfile)")
    args = parser.parse_args()
    import numbagrad

    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        torch = None
    ours = cases(numbagrad)
    theirs = cases(torch) if torch is not None else {}
    head = f"{'op':30} {'':8} {'ng us':>8} {'torch us':>9} {'ratio':>6} {'ng cpu':>8} {'torch cpu':>9}"
    if args.calls:
        head += f" {'calls':>6}"
    print(f"shape {SHAPE} float32, requires grad, 1 thread; us per call (median of interleaved repeats)")
    print(head)
    for label, pair in ours.items():
        for k, kind in enumerate(("fwd", "fwd+bwd")):
            fns = [pair[k]] + ([theirs[label][k]] if theirs else [])
            wall, cpu = measure(fns)
            tw = f"{wall[1] * 1e6:9.2f}" if theirs else f"{'-':>9}"
            tc = f"{cpu[1] * 1e6:9.2f}" if theirs else f"{'-':>9}"
            ratio = f"{wall[0] / wall[1]:6.2f}" if theirs else f"{'-':>6}"
            line = f"{label:30} {kind:8} {wall[0] * 1e6:8.2f} {tw} {ratio} {cpu[0] * 1e6:8.2f} {tc}"
            if args.calls:
                line += f" {python_calls(pair[k]):6.0f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
