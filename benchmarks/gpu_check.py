"""The one script to run when a GPU is lent: checks and times numbagrad's cuda backend in one go (under 5 minutes).

    python benchmarks/gpu_check.py            # on a GPU: full sizes; against torch on the same GPU when it has CUDA
    python benchmarks/gpu_check.py --sim      # Numba's CUDA simulator, tiny sizes: proves the script runs (CI)
    python benchmarks/gpu_check.py --no-tests # skip running the CUDA test files on the device

First every table row (forward and gradients), reductions, matmul, indexing and ``apply_`` are compared with the
CPU path on fresh random data. Then rows, each printed as soon as it is measured (a later failure leaves the
earlier figures on the screen):
- the driver's device-to-device copy bandwidth and elementwise relu forward+backward at 1e8 float32, as GB/s and as a
  fraction of the copy bandwidth (target >= 80%);
- matmul 4096 x 4096 float32 in TFLOP/s, and torch's (cuBLAS) when torch has CUDA here;
- the char GPT and MNIST CNN training steps of ``bench_models.py``, numbagrad against torch, ms per step, with the
  caching allocator's peak and a check that a repeated step reserves no new memory;
- ``Tensor.apply_`` at 1e8 float32 against the same arithmetic as table ops;
- the first call's compile time with an empty kernel cache and with a warm one (fresh processes);
- finally the CUDA test files, run on the device instead of the simulator.
Times come from ``numbagrad.cuda.Event`` pairs around ``REPEATS`` runs, after a warm-up run; the median is printed.
Under ``--sim`` the timings are the simulator's (Python threads) and mean nothing; only the run matters.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

#: Sizes on a GPU and under the simulator (where every GPU thread is a Python thread).
SIZES = {
    "gpu": {"n": 10**8, "matmul": 4096, "gpt": {}, "cnn": {}, "repeats": 10, "warmup": True},
    "sim": {
        "n": 2_000,
        "matmul": 24,
        "gpt": {"n_layer": 1, "n_embd": 8, "block": 4, "batch": 2},
        "cnn": {"batch": 2, "image": 8, "channels": (2, 4), "hidden": 8},
        "repeats": 1,
        "warmup": False,  # one run of each: a simulated GPT step launches hundreds of kernels in Python threads
    },
}
CUDA_TESTS = [
    "tests/test_cuda.py",
    "tests/test_cuda_runtime.py",
    "tests/test_backend.py",
    "tests/test_nn_cuda.py",
    "tests/test_nn_conv_family_cuda.py",
    "tests/test_compile_cuda.py",
]


def _timed(fn, repeats: int, warmup: bool = True, cuda=None) -> float:
    """Median seconds of ``fn()`` over ``repeats`` runs after one warm-up, timed by the events of ``cuda``:
    ``numbagrad.cuda`` by default, ``torch.cuda`` for torch's rows (the two have the same Event API)."""
    if cuda is None:
        import numbagrad

        cuda = numbagrad.cuda
    if warmup:
        fn()
    cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0)
    return statistics.median(times)


def _torch_cuda():
    """torch when it is installed with a usable GPU, else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def row(name: str, ours: str, theirs: str = "", note: str = "") -> None:
    print(f"| {name:<34} | {ours:>22} | {theirs:>22} | {note}", flush=True)


# --- the rows ----------------------------------------------------------------------------------------------------
def check_ops(n: int) -> list[str]:
    """Every table row (forward, backward), reductions, matmul, indexing and apply_ on fresh random data."""
    import numpy as np

    import numbagrad
    from numbagrad.ops.elementwise import function_for
    from numbagrad.scalar_math import ROWS, example_params

    rng = np.random.default_rng()
    failures = []

    def compare(name, gpu, cpu, rtol=1e-10):
        if not np.allclose(gpu.detach().cpu().numpy(), cpu.detach().numpy(), rtol=rtol, atol=1e-12):
            failures.append(name)

    for name, row in sorted(ROWS.items()):
        data = [rng.uniform(*row.domain, size=s) for s in [(n, 3), (3,), (n, 1)][: row.arity]]
        if row.integral_only:
            data = [np.round(d * 3).astype(np.int64) for d in data]
        grad = row.differentiable
        wants = [grad and i not in row.no_formula for i in range(row.arity)]  # (zeta's x, igamma's a: no formula)
        cpu = [numbagrad.tensor(d, requires_grad=w) for d, w in zip(data, wants)]
        gpu = [numbagrad.tensor(d, device="cuda", requires_grad=w) for d, w in zip(data, wants)]
        out_c, out_g = (function_for(name).apply(*t, *example_params(ROWS[name])) for t in (cpu, gpu))
        compare(f"{name} forward", out_g, out_c)
        if not grad:
            continue
        out_c.sum().backward()
        out_g.sum().backward()
        for i, (c, g) in enumerate(zip(cpu, gpu)):
            if wants[i]:
                compare(f"{name} grad{i}", g.grad, c.grad)
    x = rng.normal(size=(n, 5, 3))
    xc, xg = numbagrad.tensor(x), numbagrad.tensor(x, device="cuda")
    for op in ("sum", "mean", "amax", "amin"):
        for dim in (0, 1, (0, 2)):
            compare(f"{op}(dim={dim})", getattr(xg, op)(dim=dim), getattr(xc, op)(dim=dim))
    a, b = rng.normal(size=(n, 17)), rng.normal(size=(17, 9))
    compare("matmul", numbagrad.tensor(a, device="cuda") @ numbagrad.tensor(b, device="cuda"),
            numbagrad.tensor(a) @ numbagrad.tensor(b))  # fmt: skip
    compare("getitem", xg[1:, 2, ::2], xc[1:, 2, ::2])
    compare("apply_", xg.clone().apply_(lambda v: v * v - 1), xc.clone().apply_(lambda v: v * v - 1))
    return failures


def bandwidth(size: dict) -> None:
    import numbagrad

    n, repeats = size["n"], size["repeats"]
    x = numbagrad.randn(n, device="cuda")
    out = numbagrad.empty(n, device="cuda")
    copy_s = _timed(lambda: _device_to_device(out, x), repeats, size["warmup"])
    copy_gbs = 2 * 4 * n / copy_s / 1e9
    row(f"device-to-device copy {n:.0e} float32", f"{copy_gbs:.1f} GB/s")
    leaf = numbagrad.randn(n, device="cuda", requires_grad=True)
    grad = numbagrad.ones(n, device="cuda")

    def relu_forward_backward():
        leaf.grad = None
        leaf.relu().backward(grad)

    step_s = _timed(relu_forward_backward, repeats, size["warmup"])
    moved = 4 * n * (2 + 3)  # forward reads x and writes y; backward reads g and x and writes x.grad
    gbs = moved / step_s / 1e9
    row("relu forward+backward", f"{gbs:.1f} GB/s", "", f"{gbs / copy_gbs:.0%} of copy (target >= 80%)")


def _device_to_device(dst, src) -> None:
    """The driver's device-to-device copy (cuMemcpyDtoD): the bandwidth reference (a clone under the simulator)."""
    from numbagrad.backend import cuda as backend

    if backend.simulator():
        dst.copy_(src)
        return
    from numba.cuda.cudadrv import driver

    driver.device_to_device(dst._data, src._data, src.numel() * src.element_size())


def matmul(size: dict) -> None:
    import numbagrad

    m, repeats = size["matmul"], size["repeats"]
    a, b = numbagrad.randn(m, m, device="cuda"), numbagrad.randn(m, m, device="cuda")
    ours = _timed(lambda: a @ b, repeats, size["warmup"])
    torch = _torch_cuda()
    theirs = ""
    if torch is not None:
        ta, tb = torch.randn(m, m, device="cuda"), torch.randn(m, m, device="cuda")
        theirs = f"{2 * m**3 / _timed(lambda: ta @ tb, repeats, cuda=torch.cuda) / 1e12:.2f} TFLOP/s"
    from numbagrad.backend import cuda as backend

    engine = "cuBLAS via CuPy" if backend._cupy() is not None else "register-tiled kernel"
    row(f"matmul {m}x{m} float32", f"{2 * m**3 / ours / 1e12:.2f} TFLOP/s", theirs, engine)


def _step(lib, model, optimizer, batch: list, clip):
    """One training step of ``model`` on ``batch`` (zero_grad, forward, backward, clip, step)."""
    params = list(model.parameters())

    def step():
        optimizer.zero_grad()
        loss = model(*batch)
        loss.backward()
        if clip:
            lib.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        return loss

    return step


def _cuda_step(lib, build, sizes: dict, name: str):
    import numpy as np

    model_class, make_optimizer, make_batch, clip = build(lib, np.random.default_rng(0), **sizes)
    model = model_class().to("cuda")
    if name == "cnn":
        model.eval()  # the example's dropout off, as in bench_models
    batch = [lib.as_tensor(a, device="cuda") for a in make_batch()]
    return _step(lib, model, make_optimizer(model), batch, clip)


def training_steps(size: dict) -> None:
    import numbagrad
    from bench_models import cnn, gpt

    torch = _torch_cuda()
    for name, build in (("gpt", gpt), ("cnn", cnn)):
        step = _cuda_step(numbagrad, build, size[name], name)
        if size["warmup"]:
            step()  # the optimizer's state and the kernels exist from here on
        numbagrad.cuda.synchronize()
        numbagrad.cuda.reset_peak_memory_stats()
        reserved = numbagrad.cuda.memory_reserved()
        ours = _timed(step, size["repeats"], size["warmup"])
        grown = (numbagrad.cuda.memory_reserved() - reserved) / 2**10
        peak = numbagrad.cuda.max_memory_allocated() / 2**20
        steady = f"reserved +{grown:.0f} KiB over {size['repeats'] + size['warmup']} more steps"
        theirs = ""
        if torch is not None:
            theirs = (
                f"{_timed(_cuda_step(torch, build, size[name], name), size['repeats'], cuda=torch.cuda) * 1e3:.2f} ms"
            )
        row(f"{name} training step", f"{ours * 1e3:.2f} ms", theirs, f"peak {peak:.1f} MiB, {steady}")


def apply_(size: dict) -> None:
    import numbagrad

    n, repeats = size["n"], size["repeats"]
    x = numbagrad.randn(n, device="cuda")
    ours = _timed(lambda: x.apply_(lambda v: v * 2.0 + 1.0), repeats, size["warmup"])
    table = _timed(lambda: x.mul_(2.0).add_(1.0), repeats, size["warmup"])
    row(f"apply_(v * 2 + 1) {n:.0e} float32", f"{2 * 4 * n / ours / 1e9:.1f} GB/s", "", f"mul_+add_: {table:.2e} s")


_FIRST_CALL = """
import time
t0 = time.perf_counter()
import numbagrad
x = numbagrad.randn(1000, device="cuda", requires_grad=True)
(x * 2 + 1).relu().sum().backward()
numbagrad.cuda.synchronize()
print(time.perf_counter() - t0)
"""


def first_call(size: dict, sim: bool) -> None:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBAGRAD_CACHE_DIR=cache, NUMBA_CACHE_DIR=os.path.join(cache, "numba"))
        if sim:
            env["NUMBA_ENABLE_CUDASIM"] = "1"
        figures = []
        for _ in ("empty", "warm"):
            out = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, capture_output=True, text=True)
            if out.returncode:
                raise RuntimeError(out.stderr[-2000:])
            figures.append(float(out.stdout.strip().splitlines()[-1]))
    row("first call: import + fwd/bwd", f"{figures[0]:.2f} s empty cache", f"{figures[1]:.2f} s warm cache")


def device_tests(budget_s: float) -> int:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = os.path.join(ROOT, "src")
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", *CUDA_TESTS]
    print(f"\n$ {' '.join(cmd[2:])}   (on the device, {budget_s:.0f} s budget)", flush=True)
    try:
        return subprocess.run(cmd, cwd=ROOT, env=env, timeout=budget_s).returncode
    except subprocess.TimeoutExpired:
        print("CUDA tests: out of time (the figures above stand)")
        return 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim", action="store_true", help="run under Numba's CUDA simulator on tiny sizes")
    parser.add_argument("--no-tests", action="store_true", help="skip running the CUDA test files on the device")
    parser.add_argument("--budget", type=float, default=290.0, help="seconds for the whole script")
    args = parser.parse_args()
    if args.sim:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # before numbagrad (and numba.cuda) is imported
    started = time.perf_counter()
    import numbagrad

    if not numbagrad.cuda.is_available():
        from numbagrad.backend import cuda_backend

        print(f"no GPU: {cuda_backend().unavailable_reason()}; run with --sim for the simulator")
        return 2
    size = SIZES["sim" if args.sim else "gpu"]
    device = "Numba CUDA simulator" if args.sim else _device_name()
    print(f"numbagrad {numbagrad.__version__} on {device}; torch on the GPU: {_torch_cuda() is not None}")
    mismatches = check_ops(2 if args.sim else 1000)
    print(("MISMATCH against the CPU path: " + ", ".join(mismatches)) if mismatches else "all ops match the CPU path")
    print()
    row("check", "numbagrad", "torch", "")
    row("-" * 34, "-" * 22, "-" * 22, "")
    failed = ["ops against the CPU"] if mismatches else []
    for name, run in (
        ("bandwidth", lambda: bandwidth(size)),
        ("matmul", lambda: matmul(size)),
        ("training steps", lambda: training_steps(size)),
        ("apply_", lambda: apply_(size)),
        ("first call", lambda: first_call(size, args.sim)),
    ):
        try:
            run()
        except Exception as error:  # one failing row must not hide the others' figures
            failed.append(name)
            row(name, "FAILED", "", f"{type(error).__name__}: {error}"[:200])
    status = 1 if failed else 0
    if not args.sim and not args.no_tests:
        status |= device_tests(max(30.0, args.budget - (time.perf_counter() - started)))
    print(f"\ngpu_check: {time.perf_counter() - started:.0f} s, {'failed: ' + ', '.join(failed) if failed else 'ok'}")
    return status


def _device_name() -> str:
    from numba import cuda

    return (
        cuda.get_current_device().name.decode()
        if hasattr(cuda.get_current_device().name, "decode")
        else str(cuda.get_current_device().name)
    )


if __name__ == "__main__":
    sys.exit(main())
