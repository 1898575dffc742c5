"""Check every op on a real GPU against the CPU path, then time elementwise forward + backward and ``apply_``
at 1e8 float32 against measured device-to-device copy bandwidth (and torch on the same GPU when present).

    python benchmarks/gpu_check.py            # on a GPU machine, under 5 minutes
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/gpu_check.py --smoke   # the checks only, tiny sizes (CI)
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

import numbagrad
from numbagrad.scalar_math import ROWS, example_params


def check_ops(n: int) -> list[str]:
    """Every table row (forward, backward), reductions, matmul, indexing and apply_ on fresh random data."""
    from numbagrad.ops.elementwise import function_for

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
        cpu = [numbagrad.tensor(d, requires_grad=grad) for d in data]
        gpu = [numbagrad.tensor(d, device="cuda", requires_grad=grad) for d in data]
        out_c, out_g = (function_for(name).apply(*t, *example_params(ROWS[name])) for t in (cpu, gpu))
        compare(f"{name} forward", out_g, out_c)
        if not grad:
            continue
        out_c.sum().backward()
        out_g.sum().backward()
        for i, (c, g) in enumerate(zip(cpu, gpu)):
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


def _time_cuda(fn, repeats: int) -> float:
    """Median seconds of ``fn`` measured with CUDA events, after a warm-up call."""
    from numba import cuda

    fn()
    cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, stop = cuda.event(), cuda.event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cuda.event_elapsed_time(start, stop) / 1e3)
    return statistics.median(times)


def benchmark(n: int, repeats: int) -> list[tuple[str, float, float, float | None]]:
    """(case, seconds, GB/s, torch GB/s) rows; bytes counted as each kernel's reads + writes."""
    x = numbagrad.randn(n, device="cuda", dtype=numbagrad.float32)
    g = numbagrad.randn(n, device="cuda", dtype=numbagrad.float32)
    out = numbagrad.empty(n, device="cuda", dtype=numbagrad.float32)
    nbytes = 4 * n
    rows = []
    copy = _time_cuda(lambda: _d2d(out._data, x._data), repeats)
    rows.append(("device-to-device copy", copy, 2 * nbytes / copy / 1e9, None))
    xr = x.detach().requires_grad_(True)

    def fwd_bwd():
        y = xr.tanh()
        y.backward(g)
        xr.grad = None

    t = _time_cuda(fwd_bwd, repeats)  # tanh: read x, write y; grad: read g and y, write dx
    torch_rate = _torch_rate(n, repeats)
    rows.append(("tanh forward + backward", t, 5 * nbytes / t / 1e9, torch_rate))
    t = _time_cuda(lambda: x.apply_(lambda v: v * 0.5 + 0.25), repeats)
    rows.append(("apply_(v * 0.5 + 0.25)", t, 2 * nbytes / t / 1e9, None))
    return rows


def _d2d(dst, src) -> None:
    """numba's driver-level device-to-device copy (cuMemcpyDtoD): the bandwidth reference."""
    from numba.cuda.cudadrv import driver

    driver.device_to_device(dst, src, src.size * src.dtype.itemsize)


def _torch_rate(n: int, repeats: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    x = torch.randn(n, device="cuda", requires_grad=True)
    g = torch.randn(n, device="cuda")

    def fwd_bwd():
        x.tanh().backward(g)
        x.grad = None

    fwd_bwd()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fwd_bwd()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3)
    return 5 * 4 * n / statistics.median(times) / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="checks only, at tiny sizes (works on the simulator)")
    parser.add_argument("--n", type=float, default=1e8, help="elements for the timings (default 1e8)")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    if not numbagrad.cuda.is_available():
        from numbagrad.backend import cuda

        print(f"gpu_check: no GPU here ({cuda.unavailable_reason()}). Run it on a CUDA machine, or with "
              "NUMBA_ENABLE_CUDASIM=1 and --smoke to check the script on the simulator.")  # fmt: skip
        return 2
    failures = check_ops(2 if args.smoke else 1000)
    if failures:
        print("MISMATCH against the CPU path: " + ", ".join(failures))
        return 1
    print("all ops match the CPU path")
    if args.smoke:
        return 0
    from numbagrad.backend import cuda

    if cuda.simulator():
        print("simulator: timings skipped (they mean nothing there)")
        return 0
    rows = benchmark(int(args.n), args.repeats)
    ref = rows[0][2]
    print(f"\n{'case (1e8 float32)':<28}{'median ms':>10}{'GB/s':>9}{'of copy':>9}{'torch GB/s':>12}")
    for name, t, rate, torch_rate in rows:
        torch_col = f"{torch_rate:12.0f}" if torch_rate else f"{'-':>12}"
        print(f"{name:<28}{t * 1e3:10.2f}{rate:9.0f}{rate / ref:9.0%}{torch_col}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
