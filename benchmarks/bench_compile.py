"""``numbagrad.compile`` against torch eager, numbagrad eager and a hand-written fused Numba kernel pair.

    python benchmarks/bench_compile.py --table          # side by side, 1 thread and 2 threads, plus compile times
    python benchmarks/bench_compile.py --table --big    # also relu(x*w+b) at n=1e8 (about 3 GB)
    python benchmarks/bench_compile.py --table --quick  # fewer sizes and repeats

The table runs each thread count in its own process (``torch.set_num_threads``, ``NUMBA_NUM_THREADS``,
``OPENBLAS_NUM_THREADS`` set before anything loads), the libraries side by side in it, their calls interleaved so
that they see the same machine load; medians. The 1-thread ratios are the ones the targets are about:

* ``relu(x*w+b).sum()`` forward+backward, compiled: <= 0.4x torch at 1e3, <= 0.45x at 1e5, <= 0.35x at 1e7, and
  >= 80% of the hand-fused kernel pair's throughput (``ceiling``) at 1e7 and 1e8;
* swish ``x * sigmoid(x)`` as a custom Function with its own backward, compiled: <= 0.5x torch's ``silu`` at 1e5
  (its ``ceiling`` is a hand-written forward that sums directly and a backward, with numbagrad's own float32
  ``exp`` and nothing between them: the kernels' share of a step, without the graph and the eager ``sum``);
* a 784-128-10 MLP with GELU, cross-entropy and an SGD step, the model compiled: <= 0.8x torch eager.

GELU is the tanh approximation written out in table ops here (as when this benchmark was written, before
``nn.functional.gelu`` became a table row); torch runs its own ``F.gelu(approximate="tanh")`` kernel. Compile
times come from fresh processes: *cold* with an empty kernel cache, *warm* with the cache the cold run filled; each
gives the time to the first result (the trace, which runs eagerly) and to the first compiled result (the second
call, which loads or compiles the fused kernels), beside eager numbagrad's time to its first result in a fresh
process.

The ``time_*`` methods of the classes below are asv benchmarks (``asv run``): compiled steps after warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import interleaved_medians as compare_medians  # noqa: E402
from compare import settle_time  # noqa: E402

# --- the programs -------------------------------------------------------------------------------------------------
GELU_C = 0.7978845608028654  # sqrt(2 / pi)


def gelu(lib, x):
    """GELU, tanh approximation, from table ops (torch: ``F.gelu(x, approximate="tanh")``)."""
    return 0.5 * x * (1 + lib.tanh(GELU_C * (x + 0.044715 * x * x * x)))


def relu_affine_step(lib, n: int, compiled: bool = False, dtype=np.float32):
    """One ``relu(x*w+b).sum()`` forward+backward; returns the step function."""
    rng = np.random.default_rng(0)
    x, w, b = (lib.tensor(rng.standard_normal(n).astype(dtype), requires_grad=True) for _ in range(3))

    def fn(x, w, b):
        return lib.relu(x * w + b).sum()

    if compiled:
        fn = lib.compile(fn)

    def step():
        x.grad = w.grad = b.grad = None
        fn(x, w, b).backward()

    return step


def hand_fused_step(n: int, dtype=np.float32):
    """The ceiling: one hand-written @njit forward (the sum directly) and one backward (gx, gw, gb in one pass),
    reading operands unconditionally, gradients allocated by numpy outside the kernels, no graph."""
    from numba import njit, prange

    parallel = n >= (1 << 23)

    @njit(nogil=True, fastmath={"reassoc"}, parallel=parallel)
    def forward(x, w, b):
        acc = 0.0
        for i in prange(x.shape[0]):
            v = x[i] * w[i] + b[i]
            acc += v if v > 0 else 0.0
        return acc

    @njit(nogil=True, parallel=parallel)
    def backward(g, x, w, b, gx, gw, gb):
        for i in prange(x.shape[0]):
            m = g if x[i] * w[i] + b[i] > 0 else 0.0
            gx[i] = m * w[i]
            gw[i] = m * x[i]
            gb[i] = m

    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(n).astype(dtype) for _ in range(3))

    def step():
        forward(x, w, b)
        gx, gw, gb = np.empty(n, dtype), np.empty(n, dtype), np.empty(n, dtype)
        backward(dtype(1.0), x, w, b, gx, gw, gb)
        return gx, gw, gb

    return step


def swish_step(lib, n: int, compiled: bool = False):
    """``x * sigmoid(x)``: numbagrad as a custom Function with its own backward (compiled or not); torch's silu."""
    x = lib.tensor(np.random.default_rng(0).standard_normal(n).astype(np.float32), requires_grad=True)
    if lib.__name__ == "torch":
        fn = lib.nn.functional.silu
    else:

        class Swish(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * lib.sigmoid(x)

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                s = lib.sigmoid(x)
                return g * (s + x * s * (1 - s))

        fn = (lib.compile(Swish) if compiled else Swish).apply

    def step():
        x.grad = None
        fn(x).sum().backward()

    return step


SWISH_CEILING = """
@njit(cache=False, error_model="numpy", inline="always")
def _sigmoid(v):
    e = _vexpf_nonpositive(-abs(v))
    return _f32(1.0) / (_f32(1.0) + e) if v >= 0 else e / (_f32(1.0) + e)


@njit(nogil=True, error_model="numpy", fastmath={"reassoc"})
def forward(x, s):
    acc = 0.0
    for i in range(x.shape[0]):
        si = _sigmoid(x[i])
        s[i] = si
        acc += x[i] * si
    return acc


@njit(nogil=True, error_model="numpy")
def backward(g, x, s, gx):
    for i in range(x.shape[0]):
        si = s[i]
        gx[i] = g * (si + x[i] * si * (_f32(1.0) - si))
"""


def hand_fused_swish_step(n: int):
    """The swish ceiling: one hand-written forward that keeps ``sigmoid(x)`` and sums ``x * sigmoid(x)`` directly,
    one backward, float32 with numbagrad's own vectorizable ``exp`` (``backend.vector_math``), no graph, no Python
    between them. What a compiled swish would take if everything but its two kernels cost nothing."""
    from numba import njit

    from numbagrad.backend import vector_math

    namespace = {"njit": njit, "CACHE": False}
    source = vector_math.SOURCE + vector_math.SINGLE_SOURCE + SWISH_CEILING
    exec(compile(source, "<swish ceiling>", "exec"), namespace)
    forward, backward = namespace["forward"], namespace["backward"]
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)

    def step():
        s = np.empty_like(x)
        forward(x, s)
        gx = np.empty_like(x)
        backward(np.float32(1.0), x, s, gx)
        return gx

    return step


BATCH, SIZES = 64, (784, 128, 10)


def mlp_step(lib, compiled: bool = False):
    """One training step of a 784-128-10 MLP with GELU: forward, cross-entropy, backward, SGD."""
    lib.manual_seed(0)
    nn = lib.nn

    if lib.__name__ == "torch":

        def act(h):
            return lib.nn.functional.gelu(h, approximate="tanh")
    else:

        def act(h):
            return gelu(lib, h)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(SIZES[0], SIZES[1])
            self.fc2 = nn.Linear(SIZES[1], SIZES[2])

        def forward(self, x):
            return self.fc2(act(self.fc1(x)))

    model = MLP()
    optimizer = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    run = lib.compile(model) if compiled else model
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((BATCH, SIZES[0])), dtype=lib.float32)
    y = lib.tensor(rng.integers(0, SIZES[2], BATCH))

    def step():
        optimizer.zero_grad()
        loss = lib.nn.functional.cross_entropy(run(x), y)
        loss.backward()
        optimizer.step()

    return step


# --- timing -------------------------------------------------------------------------------------------------------
def interleaved_medians(steps: dict, budget: float, settle: float = 0.0) -> dict:
    """Median seconds per call of each step, by ``compare.interleaved_medians`` (the steps alternate batch by batch
    in 9 rounds, sharing ``budget`` seconds; ``settle`` as there): the same timing, keyed by the steps' names."""
    times = compare_medians(list(steps.values()), budget / max(len(steps), 1), 9, settle)
    return dict(zip(steps, times))


def worker(threads: int, quick: bool, big: bool) -> dict:
    """The measurements at one thread count (run in a fresh process with the thread variables set)."""
    import numbagrad as ng

    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:
        torch = None
    budget = 0.6 if quick else 2.0
    settle = settle_time(threads)
    results = {}
    sizes = (1_000, 100_000, 10_000_000) + ((100_000_000,) if big else ())
    for n in sizes:
        steps = {
            "compiled": relu_affine_step(ng, n, compiled=True),
            "ceiling": hand_fused_step(n),
        }
        if n < 100_000_000:
            steps["eager"] = relu_affine_step(ng, n)
            if torch is not None:
                steps["torch"] = relu_affine_step(torch, n)
        budget_n = budget * (2 if n >= 1e7 else 1)
        results[f"relu(x*w+b).sum() f+b, n={n:.0e}"] = interleaved_medians(steps, budget_n, settle)
        steps.clear()
    for n in (100_000,) if quick else (1_000, 100_000, 10_000_000):
        steps = {
            "compiled": swish_step(ng, n, compiled=True),
            "ceiling": hand_fused_swish_step(n),
            "eager": swish_step(ng, n),
        }
        if torch is not None:
            steps["torch"] = swish_step(torch, n)
        results[f"swish custom Function f+b [torch: silu], n={n:.0e}"] = interleaved_medians(steps, budget, settle)
    steps = {"compiled": mlp_step(ng, compiled=True), "eager": mlp_step(ng)}
    if torch is not None:
        steps["torch"] = mlp_step(torch)
    results["MLP 784-128-10 GELU+CE+SGD step, batch 64"] = interleaved_medians(steps, budget, settle)
    return results


# --- fresh processes: compile times ---------------------------------------------------------------------------------
FRESH = """
import time
t0 = time.perf_counter()
import numpy as np, numbagrad as ng
import bench_compile as b
kind, compiled = {kind!r}, {compiled!r}
if kind == "relu":
    step = b.relu_affine_step(ng, 1000, compiled=compiled)
elif kind == "swish":
    step = b.swish_step(ng, 100_000, compiled=compiled)
else:
    step = b.mlp_step(ng, compiled=compiled)
t1 = time.perf_counter()
step()
t2 = time.perf_counter()
step()
t3 = time.perf_counter()
print(t2 - t1, t3 - t1, t3 - t0)
"""


def fresh(kind: str, compiled: bool, cache: str) -> tuple[float, float, float]:
    """(first step, first two steps, whole process from import) in seconds, in a fresh interpreter."""
    env = dict(os.environ, NUMBAGRAD_CACHE_DIR=cache, PYTHONPATH=os.pathsep.join(sys.path))
    code = FRESH.format(kind=kind, compiled=compiled)
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True, text=True, cwd=here)
    return tuple(float(v) for v in out.stdout.split())


def compile_times(quick: bool) -> list:
    rows = []
    for kind, label in (("relu", "relu(x*w+b).sum() n=1e3"), ("swish", "swish n=1e5"), ("mlp", "MLP step")):
        with tempfile.TemporaryDirectory() as cache:
            cold = fresh(kind, True, cache)
            warm = [fresh(kind, True, cache) for _ in range(1 if quick else 3)]
            eager = [fresh(kind, False, cache) for _ in range(1 if quick else 3)]
        warm = tuple(statistics.median(w[i] for w in warm) for i in range(3))
        eager = tuple(statistics.median(e[i] for e in eager) for i in range(3))
        rows.append((label, cold, warm, eager))
    return rows


# --- the table ------------------------------------------------------------------------------------------------------
def table(quick: bool, big: bool) -> None:
    here = os.path.abspath(__file__)
    runs = {}
    for threads in (1, 2):
        env = dict(
            os.environ,
            NUMBA_NUM_THREADS=str(threads),
            OPENBLAS_NUM_THREADS=str(threads),
            OMP_NUM_THREADS=str(threads),
            MKL_NUM_THREADS=str(threads),
        )
        args = [sys.executable, here, "--worker", str(threads)] + ["--quick"] * quick + ["--big"] * big
        out = subprocess.run(args, check=True, env=env, capture_output=True, text=True)
        runs[threads] = json.loads(out.stdout.strip().splitlines()[-1])
    head = (
        f"{'benchmark (medians, us; 1 thread | 2 threads)':48} {'torch':>9} {'eager':>9} {'compiled':>9} "
        f"{'ceiling':>9} {'c/torch':>8} {'c/ceil':>7} | {'torch':>9} {'compiled':>9} {'c/torch':>8} {'c/ceil':>7}"
    )
    print(head)
    print("-" * len(head))
    for label, r1 in runs[1].items():
        r2 = runs[2].get(label, {})
        cells = [f"{r1[k] * 1e6:9.1f}" if k in r1 else f"{'-':>9}" for k in ("torch", "eager", "compiled", "ceiling")]

        def ratio(r, a, b):
            return f"{r[a] / r[b]:.2f}" if a in r and b in r else "-"

        cells2 = [f"{r2[k] * 1e6:9.1f}" if k in r2 else f"{'-':>9}" for k in ("torch", "compiled")]
        print(
            f"{label:48} {' '.join(cells)} {ratio(r1, 'compiled', 'torch'):>8} {ratio(r1, 'compiled', 'ceiling'):>7} | "
            f"{' '.join(cells2)} {ratio(r2, 'compiled', 'torch'):>8} {ratio(r2, 'compiled', 'ceiling'):>7}",
            flush=True,
        )
    print("\nc/ceil is time over the ceiling's time: its inverse is the share of the ceiling's throughput reached.")
    print("\nfresh processes (s): first step = the trace (eager); two steps = through the first compiled step")
    head = f"{'program':26} {'cold: 1st':>10} {'2 steps':>8} {'warm: 1st':>10} {'2 steps':>8} "
    head += f"{'eager: 1st':>11} {'2 steps':>8}"
    print(head)
    print("-" * len(head))
    for label, cold, warm, eager in compile_times(quick):
        print(
            f"{label:26} {cold[0]:10.3f} {cold[1]:8.3f} {warm[0]:10.3f} {warm[1]:8.3f} {eager[0]:11.3f} {eager[1]:8.3f}"
        )
    print("(times from after imports and inputs; the first Numba call of a process costs ~0.4 s in every column)")


# --- asv ------------------------------------------------------------------------------------------------------------
class CompiledReluAffine:
    """``relu(x*w+b).sum()`` forward+backward through ``numbagrad.compile`` (kernels loaded in setup)."""

    params = [1_000, 100_000, 10_000_000]
    param_names = ["n"]

    def setup(self, n):
        import numbagrad as ng

        self.step = relu_affine_step(ng, n, compiled=True)
        self.step()
        self.step()

    def time_forward_backward(self, n):
        self.step()


class CompiledSwish:
    """Swish as a custom Function with its own backward, compiled (forward and backward each one kernel)."""

    params = [1_000, 100_000]
    param_names = ["n"]

    def setup(self, n):
        import numbagrad as ng

        self.step = swish_step(ng, n, compiled=True)
        self.step()
        self.step()

    def time_forward_backward(self, n):
        self.step()


class CompiledMLPStep:
    """A 784-128-10 GELU MLP training step with the model compiled."""

    def setup(self):
        import numbagrad as ng

        self.step = mlp_step(ng, compiled=True)
        self.step()
        self.step()

    def time_step(self):
        self.step()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", action="store_true", help="print the side-by-side table and compile times")
    parser.add_argument("--quick", action="store_true", help="fewer sizes, shorter timing")
    parser.add_argument("--big", action="store_true", help="also n=1e8 for relu(x*w+b) (about 3 GB)")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.quick, args.big)))
    else:
        table(args.quick, args.big)
