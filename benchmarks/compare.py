"""numbagrad against torch (CPU, default threads) and numpy, side by side in one process.

    python benchmarks/compare.py               # the table: medians of repeated runs, ratio = numbagrad / torch
    python benchmarks/compare.py --threshold   # serial vs prange kernel times by size (sets PARALLEL_THRESHOLD)

torch columns are skipped when torch is not installed. Targets (issue 3): (a) <= 0.5x, (b) f+b <= 0.7x at 1e5 and
1e7 and <= 1.0x at 1e3, (c) >= 500x faster than torch's apply_ and <= 1.5x numpy, (d) import <= 0.5 s and import
plus first backward <= 0.5x torch's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np

import numbagrad as ng

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_training  # noqa: E402 - the training-step benchmark lives beside this script

try:
    import torch
except ImportError:  # the torch columns are skipped
    torch = None


def median_time(fn, min_time: float = 0.2, repeats: int = 7) -> float:
    """Median seconds per call over ``repeats`` batches, each batch about ``min_time / repeats`` long."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    number = max(1, int(min_time / repeats / once))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return float(np.median(times))


def square_round_trip(lib):
    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)

    def run():
        x.grad = None
        Square.apply(x).sum().backward()

    return run


def relu_affine(lib, n: int, backward: bool):
    gen = np.random.default_rng(0)
    x, w, b = (lib.tensor(gen.standard_normal(n, dtype=np.float32), requires_grad=backward) for _ in range(3))

    def forward():
        return lib.relu(x * w + b)

    def forward_backward():
        for t in (x, w, b):
            t.grad = None
        y = lib.relu(x * w + b)
        y.backward(ones)

    ones = lib.ones(n)
    return forward_backward if backward else forward


def apply_double_plus_one(lib, n: int):
    t = lib.tensor(np.random.default_rng(0).standard_normal(n))

    def fn(v):
        return v * 2 + 1

    return lambda: t.apply_(fn)


def numpy_double_plus_one(n: int):
    a = np.random.default_rng(0).standard_normal(n)

    def fn(v):
        return v * 2 + 1

    def run():
        with np.errstate(over="ignore"):  # repeated doubling reaches inf, as in the other columns
            a[...] = fn(a)  # the numpy way to apply a vectorizable callable in place

    return run


def fresh_process(code: str, repeats: int = 5) -> float:
    """Median wall time of ``python -c code`` in a fresh interpreter (includes interpreter start-up)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=os.environ.copy())
        times.append(time.perf_counter() - start)
    return float(np.median(times))


FIRST_BACKWARD = (
    "import {lib} as t; x = t.ones(1000, requires_grad=True); w = t.ones(1000, requires_grad=True); "
    "y = t.relu(x * w + w).sum(); y.backward()"
)


def rows(quick: bool):
    ns = (1_000, 100_000) if quick else (1_000, 100_000, 10_000_000)
    yield "(a) Square.apply(x).sum().backward(), n=3", square_round_trip(ng), torch and square_round_trip(torch), None
    for n in ns:
        for backward in (False, True):
            label = f"(b) relu(x*w+b) {'fwd+bwd' if backward else 'fwd'}, n={n:.0e} f32"
            yield label, relu_affine(ng, n, backward), torch and relu_affine(torch, n, backward), None
    yield (
        "(e) training step 784-128-10 MLP, batch 64, SGD",
        bench_training.make_step(ng),
        torch and bench_training.make_step(torch),
        None,
    )
    yield (
        "(c) apply_(v*2+1), n=1e5 f64 [numpy: a[...] = f(a)]",
        apply_double_plus_one(ng, 100_000),
        torch and apply_double_plus_one(torch, 100_000),
        numpy_double_plus_one(100_000),
    )


def table(quick: bool) -> None:
    header = f"{'benchmark':56} {'numbagrad':>11} {'torch':>11} {'numpy':>11} {'ng/torch':>9} {'ng/numpy':>9}"
    print(header)
    print("-" * len(header))

    def line(label, t_ng, t_torch, t_np, unit="us", scale=1e6):
        cells = [f"{t * scale:9.1f}{unit}" if t is not None else f"{'-':>11}" for t in (t_ng, t_torch, t_np)]
        r_torch = f"{t_ng / t_torch:9.3f}" if t_torch else f"{'-':>9}"
        r_np = f"{t_ng / t_np:9.3f}" if t_np else f"{'-':>9}"
        print(f"{label:56} {' '.join(cells)} {r_torch} {r_np}", flush=True)

    for label, f_ng, f_torch, f_np in rows(quick):
        t_ng = median_time(f_ng)
        t_torch = median_time(f_torch) if f_torch else None
        t_np = median_time(f_np) if f_np else None
        line(label, t_ng, t_torch, t_np)
    repeats = 3 if quick else 5
    imports = [
        fresh_process(f"import {lib}", repeats) if lib == "numbagrad" or torch else None
        for lib in ("numbagrad", "torch")
    ]
    line("(d) fresh process: import", imports[0], imports[1], None, "ms", 1e3)
    firsts = [
        fresh_process(FIRST_BACKWARD.format(lib=lib), repeats) if lib == "numbagrad" or torch else None
        for lib in ("numbagrad", "torch")
    ]
    line("(d) fresh process: import + first fwd+bwd (warm cache)", firsts[0], firsts[1], None, "ms", 1e3)
    if torch is not None:
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; ", end="")
    import numba

    print(f"numba {numba.__version__}, {numba.get_num_threads()} threads; numpy {np.__version__}")


def threshold() -> None:
    """Serial against prange for the generated kernels a training step runs, to choose PARALLEL_THRESHOLD."""
    from numbagrad.backend import codegen
    from numbagrad.scalar_math import ROWS

    print(f"{'n':>10} {'kernel':>18} {'serial us':>10} {'prange us':>10} {'prange/serial':>14}")
    for n in (1 << 12, 1 << 14, 1 << 15, 1 << 16, 1 << 17, 1 << 18, 1 << 20, 1 << 22):
        for name, which, k in (("mul", "forward", 2), ("relu", "grad0", 3), ("sigmoid", "forward", 1)):
            operands = [np.random.default_rng(0).standard_normal(n, dtype=np.float32) for _ in range(k)]
            res = np.empty(n, np.float32)
            pattern = "a" * k
            serial = codegen.cpu_kernel(ROWS[name], which, pattern, False)
            parallel = codegen.cpu_kernel(ROWS[name], which, pattern, True)
            t_s = median_time(lambda s=serial, o=operands, r=res: s(r, *o), 0.1)
            t_p = median_time(lambda p=parallel, o=operands, r=res: p(r, *o), 0.1)
            print(f"{n:>10} {name + '.' + which:>18} {t_s * 1e6:10.1f} {t_p * 1e6:10.1f} {t_p / t_s:14.2f}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threshold", action="store_true", help="measure the serial/prange switch-over size")
    parser.add_argument("--quick", action="store_true", help="skip n=1e7 and use fewer fresh processes")
    args = parser.parse_args()
    threshold() if args.threshold else table(args.quick)
