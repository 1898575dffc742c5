"""numbagrad against torch (and numpy), side by side in one process, at 1 thread and at 2 threads.

    python benchmarks/compare.py               # the table: medians of interleaved repeats, ratio = numbagrad / torch
    python benchmarks/compare.py --quick       # skip n=1e7 and use fewer fresh processes
    python benchmarks/compare.py --threshold   # serial vs prange kernel times by size (sets PARALLEL_THRESHOLD)
    python benchmarks/compare.py --bfloat16    # the MLP step in bfloat16 and float32, times and memory, 1 thread

Thread counts must be fixed before Numba, OpenBLAS and torch start their pools, so the script runs itself once
per setting in a child process with ``NUMBA_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and ``OMP_NUM_THREADS`` set
(and ``torch.set_num_threads``), then prints both columns. The machine is shared and noisy: numbagrad and torch
alternate in every repeat, so both see the same load, and the ratio is what to read: each row runs in ``ROUNDS``
rounds, and the table gives the median of their ratios and, beside it, their range.

Targets (at 1 thread): (a) <= 0.6x; (b) <= 1.0x at 1e3, <= 0.8x at 1e5, <= 0.7x at 1e7; (e) <= 1.0x; (f) the
optimizers' steps over 50 small parameters (per-parameter cost) <= 1.0x torch's `foreach=True` step.
Below the table: Python function calls per elementwise op and per backward node, counted with cProfile.
torch columns are skipped when torch is not installed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

TARGETS = {
    "(a) Square.apply(x).sum().backward(), n=3": 0.6,
    "(b) relu(x*w+b).sum().backward(), f32, n=1e3": 1.0,
    "(b) relu(x*w+b).sum().backward(), f32, n=1e5": 0.8,
    "(b) relu(x*w+b).sum().backward(), f32, n=1e7": 0.7,
    "(e) MLP 784-128-10 SGD step, batch 64": 1.0,
    "(f) AdamW step, 50 params [torch foreach=True]": 1.0,
    "(f) Adam step, 50 params [torch foreach=True]": 1.0,
    "(f) SGD step, 50 params [torch foreach=True] momentum 0.9": 1.0,
}


#: Seconds of sleep before each timed batch when the libraries run more than one thread (``settle_time``).
SETTLE = 0.15


def settle_time(threads: int) -> float:
    """How long ``interleaved_medians`` lets the other library's idle workers stop before a batch: after a call
    with more than one thread, those spin for a while and take a core from whatever runs next (OpenBLAS's for about
    0.1 s). Measured at 2 threads on this 2-core host: torch's LSTM step took 68 ms right after numbagrad's and 33
    after its own; numbagrad's 47 after torch's and 39 after its own; after 0.1 s of sleep, 33 and 39. At one thread
    there are no workers, and no sleep."""
    return SETTLE if threads > 1 else 0.0


def interleaved_medians(fns: list, min_time: float = 0.4, repeats: int = 9, settle: float = 0.0) -> list[float]:
    """Median seconds per call of each function; the functions alternate batch by batch (same machine load). With
    ``settle`` (``settle_time``), each batch starts after that much sleep and one untimed call, so that it runs on
    its own library's warm workers, as a program using one library does, and not against the other's spinning
    ones."""
    numbers = []
    for fn in fns:
        fn()
        fn()
        start = time.perf_counter()
        fn()
        once = max(time.perf_counter() - start, 1e-7)
        numbers.append(max(1, int(min_time / repeats / once)))
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, number, bucket in zip(fns, numbers, times):
            if settle:
                time.sleep(settle)
                fn()
            start = time.perf_counter()
            for _ in range(number):
                fn()
            bucket.append((time.perf_counter() - start) / number)
    return [float(np.median(t)) for t in times]


# --- the workloads, written once for either library ----------------------------------------------------------
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


def relu_affine(lib, n: int):
    gen = np.random.default_rng(0)
    x, w, b = (lib.tensor(gen.standard_normal(n, dtype=np.float32), requires_grad=True) for _ in range(3))

    def run():
        x.grad = w.grad = b.grad = None
        lib.relu(x * w + b).sum().backward()

    return run


def training_step(lib):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_training  # the training-step benchmark lives beside this script

    step = bench_training.make_step(lib)
    for _ in range(20):
        step()
    return step


def apply_double_plus_one(lib, n: int, dtype: str = "float64"):
    """``t.apply_(fn)``: both libraries pass ``fn`` each element as a Python float (a double) and round the
    result to ``dtype``; numbagrad's compiled float32 loop widens and narrows whole vectors around the double
    arithmetic, conversions that cost more than the arithmetic itself (numpy's column computes in float32)."""
    t = lib.tensor(np.random.default_rng(0).standard_normal(n).astype(dtype))

    def fn(v):
        return v * 2 + 1

    return lambda: t.apply_(fn)


def numpy_double_plus_one(n: int, dtype: str = "float64"):
    a = np.random.default_rng(0).standard_normal(n).astype(dtype)

    def run():
        with np.errstate(over="ignore"):  # repeated doubling reaches inf, as in the other columns
            a[...] = a * 2 + 1

    return run


#: The optimizer rows' parameters: 50 tensors of mixed small sizes (biases, norms' weights, small matrices), so the
#: per-parameter cost shows, not the arithmetic.
OPTIMIZER_SHAPES = [(128,), (16, 16), (65,), (32, 8), (4,), (10, 10), (1000,), (3, 3, 3, 3), (7,), (64,)] * 5


def optimizer_step(lib, name: str):
    """One ``step()`` of ``name`` over ``OPTIMIZER_SHAPES`` with fixed gradients; torch's runs with ``foreach=True``
    (its multi-tensor implementation), numbagrad's with the same arguments."""
    rng = np.random.default_rng(0)
    params = []
    for shape in OPTIMIZER_SHAPES:
        p = lib.nn.Parameter(lib.tensor(rng.standard_normal(shape).astype(np.float32)))
        p.grad = lib.tensor(rng.standard_normal(shape).astype(np.float32) * 1e-3)
        params.append(p)
    make = {
        "AdamW": lambda: lib.optim.AdamW(params, lr=1e-3, weight_decay=0.1, foreach=True),
        "Adam": lambda: lib.optim.Adam(params, lr=1e-3, foreach=True),
        "SGD": lambda: lib.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=True),
    }
    optimizer = make[name]()
    optimizer.step()
    return optimizer.step


def rows(quick: bool):
    yield "(a) Square.apply(x).sum().backward(), n=3", square_round_trip, None
    for n in (1_000, 100_000) if quick else (1_000, 100_000, 10_000_000):
        yield (
            f"(b) relu(x*w+b).sum().backward(), f32, n=1e{len(str(n)) - 1}",
            lambda lib, n=n: relu_affine(lib, n),
            None,
        )
    yield "(e) MLP 784-128-10 SGD step, batch 64", training_step, None
    for name in ("AdamW", "Adam", "SGD"):
        label = f"(f) {name} step, 50 params [torch foreach=True]" + (" momentum 0.9" if name == "SGD" else "")
        yield label, lambda lib, name=name: optimizer_step(lib, name), None
    for dtype in ("float64", "float32"):
        yield (
            f"(c) apply_(v*2+1), n=1e5 f{dtype[-2:]} [numpy: a[...] = a*2+1]",
            lambda lib, dtype=dtype: apply_double_plus_one(lib, 100_000, dtype),
            numpy_double_plus_one(100_000, dtype),
        )


def measure(quick: bool, threads: int) -> dict:
    """Run in a child process whose thread counts are already set: the label -> (numbagrad, torch, numpy)."""
    import numbagrad

    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:
        torch = None
    results = {}
    for label, make, numpy_fn in rows(quick):
        fns = [make(numbagrad)] + ([make(torch)] if torch is not None else []) + ([numpy_fn] if numpy_fn else [])
        rounds = [interleaved_medians(fns, settle=settle_time(threads)) for _ in range(ROUNDS)]
        times = [float(np.median([r[k] for r in rounds])) for k in range(len(fns))]
        t_ng = times[0]
        t_torch = times[1] if torch is not None else None
        t_np = times[-1] if numpy_fn else None
        ratios = sorted(r[0] / r[1] for r in rounds) if torch is not None else []
        results[label] = (t_ng, t_torch, t_np, ratios)
    return results


#: Rounds of interleaved repeats per row: the table gives each library's median over them and the median of the
#: rounds' ratios, with their range (this host is shared: one round's ratio can be 20% off another's).
ROUNDS = 3


def python_calls() -> dict:
    """Python function calls (cProfile) of one elementwise op that records a node, and of one backward node."""
    import cProfile
    import pstats

    import numbagrad as ng

    x = ng.tensor(np.ones(1000, np.float32), requires_grad=True)
    w = ng.tensor(np.ones(1000, np.float32), requires_grad=True)
    counts = {}

    def count(fn, repeats: int = 200) -> float:
        fn()
        fn()  # (the second call is the first to accumulate into .grad: its kernel loads then, not in the profile)
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(repeats):
            fn()
        profile.disable()
        return pstats.Stats(profile).total_calls / repeats

    counts["x * w (one op, graph recorded)"] = count(lambda: x * w)
    counts["x * w under no_grad"] = count(lambda: ng.no_grad()(lambda: x * w)()) - count(
        lambda: ng.no_grad()(lambda: x)()
    )
    one = count(lambda: (x * w).sum().backward())
    two = count(lambda: ((x * w) * w).sum().backward())
    counts["one more node: op, backward node, w's 2nd gradient added"] = two - one
    counts["relu(x*w+b).sum().backward() (4 ops, 4 nodes, 3 leaves)"] = count(
        lambda: ng.relu(x * w + x).sum().backward()
    )
    return counts


def fresh_process(code: str, repeats: int) -> float:
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


ALONE = (
    "import sys, time; sys.path.insert(0, {here!r}); import compare, {lib} as lib; "
    "getattr(lib, 'set_num_threads', int)(1); run = compare.relu_affine(lib, {n}); "
    "[run() for _ in range(50)]; t = time.perf_counter(); [run() for _ in range({steps})]; "
    "print((time.perf_counter() - t) / {steps})"
)


def alone(lib: str, n: int, repeats: int, **env: str) -> float:
    """Median seconds per ``relu(x*w+b).sum().backward()`` step in fresh 1-thread processes that import ``lib``
    alone: what a user's program sees, which the side-by-side table cannot show (each library's allocations shape
    the other's heap; importing torch hid numbagrad's page faults before ``backend/malloc.py``)."""
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", **env)
    code = ALONE.format(here=os.path.dirname(os.path.abspath(__file__)), lib=lib, n=n, steps=max(20, 10**8 // n // 20))
    times = [
        float(subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True, text=True).stdout)
        for _ in range(repeats)
    ]
    return float(np.median(times))


def _child(quick: bool, threads: int) -> dict:
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    env["OMP_NUM_THREADS"] = str(threads)
    env.pop("OPENBLAS_CORETYPE", None)  # (see the env notes: it slows a current numpy)
    args = [sys.executable, os.path.abspath(__file__), "--child", str(threads)] + (["--quick"] if quick else [])
    out = subprocess.run(args, check=True, env=env, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _cell(t: float | None, scale: float = 1e6, unit: str = "us") -> str:
    return f"{t * scale:9.1f}{unit}" if t is not None else f"{'-':>11}"


def table(quick: bool) -> None:
    per_threads = {threads: _child(quick, threads) for threads in (1, 2)}
    head = (
        f"{'benchmark':54} {'numbagrad':>11} {'torch':>11} {'ng/torch':>9} {'rounds':>11} {'target':>7} {'met':>4} | "
        f"{'2 threads':>9}"
    )
    print(head)
    print("-" * len(head))
    for label, (t_ng, t_torch, t_np, ratios) in per_threads[1].items():
        ratios2 = per_threads[2][label][3]
        ratio = float(np.median(ratios)) if ratios else None
        ratio2 = float(np.median(ratios2)) if ratios2 else None
        spread = f"{ratios[0]:.2f}-{ratios[-1]:.2f}" if ratios else "-"
        target = TARGETS.get(label)
        met = "" if target is None or ratio is None else ("yes" if ratio <= target else "no")
        extra = f"   numpy {_cell(t_np)} ng/numpy {t_ng / t_np:.3f}" if t_np else ""
        print(
            f"{label:54} {_cell(t_ng)} {_cell(t_torch)} {f'{ratio:9.3f}' if ratio else '-':>9} {spread:>11} "
            f"{target if target else '':>7} {met:>4} | {f'{ratio2:9.3f}' if ratio2 else '-':>9}{extra}",
            flush=True,
        )
    repeats = 3 if quick else 5
    try:
        import torch  # noqa: F401 - only to know whether to time its import

        libs = ("numbagrad", "torch")
    except ImportError:
        libs = ("numbagrad",)
    imports = [fresh_process(f"import {lib}", repeats) for lib in libs]
    firsts = [fresh_process(FIRST_BACKWARD.format(lib=lib), repeats) for lib in libs]
    for label, times in (("(d) fresh process: import", imports), ("(d) fresh process: import + first fwd+bwd", firsts)):
        t_torch = times[1] if len(times) > 1 else None
        ratio = f"{times[0] / t_torch:9.3f}" if t_torch else "-"
        print(f"{label:54} {_cell(times[0], 1e3, 'ms')} {_cell(t_torch, 1e3, 'ms')} {ratio:>9}")
    print("\nEach library alone in fresh 1-thread processes (no torch beside numbagrad), µs per step:")
    for n in (100_000, 1_000_000):
        cells = [alone("numbagrad", n, repeats), alone("numbagrad", n, repeats, NUMBAGRAD_TUNE_MALLOC="0")]
        cells += [alone("torch", n, repeats)] if len(libs) > 1 else []
        names = ("numbagrad", "numbagrad, glibc's malloc policy", "torch")
        print(f"  relu(x*w+b).sum().backward(), f32, n=1e{len(str(n)) - 1}: "
              + ", ".join(f"{name} {t * 1e6:.1f}" for name, t in zip(names, cells)))  # fmt: skip
    print("\nPython function calls (cProfile):")
    for label, calls in python_calls().items():
        print(f"  {label:60} {calls:7.1f}")
    import numba

    print(f"\nnumba {numba.__version__}, numpy {np.__version__}; columns: 1 thread each (torch, Numba, OpenBLAS); "
          f"ng/torch: the median of {ROUNDS} rounds' ratios, 'rounds' their range; right: the ratio with 2 threads "
          "each")  # fmt: skip


def bfloat16_step(threads: int) -> dict:
    """In a child with its thread counts set: the (e) MLP step in float32 and bfloat16 for each library, its
    median time (interleaved rounds), and for numbagrad the peak of the Python-tracked allocations (tracemalloc:
    numpy's buffers) during one step; torch's allocator is invisible to tracemalloc, so its cell stays empty. Also
    the bytes of the model's parameters, gradients and momentum buffers, which bfloat16 halves in both."""
    import tracemalloc

    import numbagrad

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_training

    try:
        import torch

        torch.set_num_threads(threads)
        libs = [numbagrad, torch]
    except ImportError:
        libs = [numbagrad]
    steps = {(lib.__name__, d): bench_training.make_step(lib, d) for lib in libs for d in ("float32", "bfloat16")}
    for step in steps.values():
        for _ in range(20):
            step()
    rounds = [interleaved_medians(list(steps.values()), settle=settle_time(threads)) for _ in range(ROUNDS)]
    out = {}
    for k, key in enumerate(steps):
        peak = None
        if key[0] == "numbagrad":
            tracemalloc.start()
            steps[key]()
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        sizes = bench_training.SIZES
        numel = sum(sizes[i] * sizes[i + 1] + sizes[i + 1] for i in range(len(sizes) - 1))
        state = 3 * numel * (2 if key[1] == "bfloat16" else 4)  # parameters, gradients, momentum buffers
        out[f"{key[0]} {key[1]}"] = (float(np.median([r[k] for r in rounds])), peak, state)
    return out


def bfloat16_table() -> None:
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    env.pop("OPENBLAS_CORETYPE", None)
    args = [sys.executable, os.path.abspath(__file__), "--child-bfloat16", "1"]
    rows = json.loads(subprocess.run(args, check=True, env=env, capture_output=True, text=True).stdout.splitlines()[-1])
    print(f"(e) MLP 784-128-10 SGD step, batch 64, 1 thread; median of {ROUNDS} interleaved rounds")
    print(f"{'library dtype':22} {'step':>11} {'peak traced':>12} {'param+grad+momentum':>20}")
    for name, (t, peak, state) in rows.items():
        traced = f"{peak / 1024:9.0f} KiB" if peak is not None else f"{'-':>12}"
        print(f"{name:22} {_cell(t)} {traced} {state / 1024:16.0f} KiB")
    for lib in ("numbagrad", "torch"):
        if f"{lib} bfloat16" in rows:
            ratio = rows[f"{lib} bfloat16"][0] / rows[f"{lib} float32"][0]
            print(f"  {lib}: bfloat16 / float32 step time {ratio:.2f}")
    if "torch bfloat16" in rows:
        print(f"  numbagrad / torch in bfloat16: {rows['numbagrad bfloat16'][0] / rows['torch bfloat16'][0]:.2f}")


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
            serial = codegen.row_kernel(ROWS[name], which, pattern, "serial")
            parallel = codegen.row_kernel(ROWS[name], which, pattern, "parallel")
            t_s, t_p = interleaved_medians(
                [lambda s=serial, o=operands, r=res: s(r, *o), lambda p=parallel, o=operands, r=res: p(r, *o)], 0.1
            )
            print(f"{n:>10} {name + '.' + which:>18} {t_s * 1e6:10.1f} {t_p * 1e6:10.1f} {t_p / t_s:14.2f}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threshold", action="store_true", help="measure the serial/prange switch-over size")
    parser.add_argument("--quick", action="store_true", help="skip n=1e7 and use fewer fresh processes")
    parser.add_argument("--bfloat16", action="store_true", help="the MLP step in bfloat16 against float32 and torch")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-bfloat16", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.quick, args.child)))
    elif args.child_bfloat16:
        print(json.dumps(bfloat16_step(args.child_bfloat16)))
    elif args.bfloat16:
        bfloat16_table()
    elif args.threshold:
        threshold()
    else:
        table(args.quick)
