"""nn.functional forward+backward, numbagrad vs torch: the three nn speed targets.

* ``conv2d``: batch 64 of 1x28x28, 32 filters of 3x3 (with bias), gradients of weight and bias (a first layer);
  ``conv2d_input_grad`` also needs the input's gradient. Target: at most 2.0x torch.
* ``layer_norm``: (64, 512) with weight and bias, all three gradients. Target: at most 1.0x torch.
* ``cross_entropy``: (64, 1000) logits, class-index targets, ``label_smoothing=0.1``. Target: at most 1.0x torch.

``python benchmarks/bench_nn.py --table`` prints the table: for 1 and then 2 threads it starts a fresh process with
``OPENBLAS_NUM_THREADS``/``NUMBA_NUM_THREADS``/``OMP_NUM_THREADS`` set (and ``torch.set_num_threads``), times both
libraries side by side in it (alternating, so both see the same machine load: call by call at one thread, block
by block after a pause at two, ``compare.settle_time``), and reports the median over ``--rounds`` rounds of each
round's median time. ``NNForwardBackward`` is the asv suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

CASES = ("conv2d", "conv2d_input_grad", "layer_norm", "cross_entropy")
TARGETS = {"conv2d": 2.0, "conv2d_input_grad": 2.0, "layer_norm": 1.0, "cross_entropy": 1.0}


def make_case(lib, case: str):
    """A closure running one forward+backward of ``case`` in ``lib`` (numbagrad or torch), gradients reset to
    None first (each call allocates its gradients, as a training step after ``zero_grad()`` does)."""
    F = lib.nn.functional
    rng = np.random.default_rng(0)

    def t(shape, requires_grad=True):
        return lib.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=requires_grad)

    if case.startswith("conv2d"):
        x = t((64, 1, 28, 28), requires_grad=case == "conv2d_input_grad")
        w, b = t((32, 1, 3, 3)), t((32,))
        g = lib.tensor(rng.standard_normal((64, 32, 26, 26)).astype(np.float32))
        leaves = [x, w, b]

        def run():
            for p in leaves:
                p.grad = None
            F.conv2d(x, w, b).backward(g)

    elif case == "layer_norm":
        x, w, b = t((64, 512)), lib.ones(512, requires_grad=True), lib.zeros(512, requires_grad=True)
        g = lib.tensor(rng.standard_normal((64, 512)).astype(np.float32))
        leaves = [x, w, b]

        def run():
            for p in leaves:
                p.grad = None
            F.layer_norm(x, (512,), w, b).backward(g)

    elif case == "cross_entropy":
        x = t((64, 1000))
        target = lib.tensor(rng.integers(0, 1000, 64))

        def run():
            x.grad = None
            F.cross_entropy(x, target, label_smoothing=0.1).backward()

    else:
        raise ValueError(case)
    return run


def _libraries() -> dict:
    import numbagrad

    libs = {"numbagrad": numbagrad}
    try:
        import torch
    except ImportError:
        return libs
    libs["torch"] = torch
    return libs


def measure(rounds: int, repeats: int, threads: int) -> dict:
    """{case: {library: [median seconds of each round]}}, the libraries alternating call by call; with more than
    one thread, block by block, each block after ``compare.settle_time`` of sleep and one untimed call (the other
    library's idle workers spin for a while after its calls, and would take a core from the next call)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from compare import settle_time

    settle = settle_time(threads)
    libs = _libraries()
    if "torch" in libs:
        libs["torch"].set_num_threads(threads)
    results = {}
    for case in CASES:
        runs = {name: make_case(lib, case) for name, lib in libs.items()}
        for run in runs.values():  # warm-up: compilation (or the disk cache), allocator, thread pools
            for _ in range(10):
                run()
        per_round = {name: [] for name in runs}
        for _ in range(rounds):
            times = {name: [] for name in runs}
            if settle:  # (block by block: each library's calls after the other's workers stopped spinning)
                for name, run in runs.items():
                    time.sleep(settle)
                    run()
                    for _ in range(repeats):
                        t0 = time.perf_counter()
                        run()
                        times[name].append(time.perf_counter() - t0)
            else:  # (call by call)
                for _ in range(repeats):
                    for name, run in runs.items():
                        t0 = time.perf_counter()
                        run()
                        times[name].append(time.perf_counter() - t0)
            for name in runs:
                per_round[name].append(statistics.median(times[name]))
        results[case] = per_round
    return results


def _subprocess(threads: int, rounds: int, repeats: int) -> dict:
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    cmd = [sys.executable, __file__, "--measure", f"--threads={threads}", f"--rounds={rounds}", f"--repeats={repeats}"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def table(rounds: int, repeats: int, threads=(1, 2)) -> None:
    results = {n: _subprocess(n, rounds, repeats) for n in threads}
    header = "| case | threads | numbagrad (ms) | torch (ms) | ratio | target |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for case in CASES:
        for n in threads:
            r = results[n][case]
            ours = statistics.median(r["numbagrad"])
            theirs = statistics.median(r["torch"]) if "torch" in r else None
            ratio = f"{ours / theirs:.2f}" if theirs else "-"
            torch_ms = f"{theirs * 1e3:.3f}" if theirs else "-"
            print(f"| {case} | {n} | {ours * 1e3:.3f} | {torch_ms} | {ratio} | <= {TARGETS[case]} |")
    print(f"\n(median over {rounds} rounds of each round's median of {repeats} calls; both libraries in one process)")


class NNForwardBackward:
    """asv: forward+backward of each case in each library (cases of a library that is not installed are skipped).
    ``setup`` builds the tensors and warms up, so the timing excludes compilation."""

    params = (list(CASES), ["numbagrad", "torch"])
    param_names = ["case", "library"]

    def setup(self, case: str, library: str) -> None:
        import importlib

        try:
            lib = importlib.import_module(library)
        except ImportError:
            raise NotImplementedError(f"{library} is not installed") from None  # asv's skip
        self.run = make_case(lib, case)
        for _ in range(10):
            self.run()

    def time_forward_backward(self, case: str, library: str) -> None:
        self.run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", action="store_true", help="the side-by-side table, 1 and 2 threads")
    parser.add_argument("--measure", action="store_true", help="(internal) measure in this process, print JSON")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=60)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.rounds, args.repeats, args.threads)))
    else:
        table(args.rounds, args.repeats)


if __name__ == "__main__":
    main()
