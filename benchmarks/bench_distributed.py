"""DistributedDataParallel throughput on this machine: 1 rank against 2 ranks, one thread each.

``python benchmarks/bench_distributed.py`` starts ``mpiexec -n 1`` and ``mpiexec -n 2`` itself (each rank with one
OpenMP/BLAS/Numba thread) and prints, for the 784-128-10 MLP with a batch of 256 per rank and SGD with momentum:

- samples per second for 1 and 2 ranks, and their ratio (target: 2 ranks >= 1.7x one rank on 2 cores);
- bytes all-reduced per step (the gradient buckets) and what a ring all-reduce moves per rank;
- the fraction of all-reduce time hidden behind backward: ``1 - exposed / t_allreduce``, where ``exposed`` is
  how long backward's final callback waits for the buckets' all-reduces on the rank that gets there last (the
  others wait for that rank too), and ``t_allreduce`` the time a blocking all-reduce of the same buckets takes
  on its own.

``--sizes 784,512,512,512,10 --bucket-cap-mb 1`` measures a deeper MLP whose early buckets can overlap the rest
of backward (``NUMBAGRAD_DDP_PROGRESS_THREAD=1`` in the environment turns DDP's progress thread on). A worker
(``--worker``) is one rank of a run; it prints one JSON line on rank 0.
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

SIZES, BATCH = (784, 128, 10), 256
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def worker(sizes: tuple[int, ...], batch: int, steps: int, repeats: int, bucket_cap_mb: float | None) -> None:
    import numbagrad as torch
    import numbagrad.distributed as dist
    from numbagrad import nn
    from numbagrad.nn.parallel import DistributedDataParallel

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()

    def mlp():
        layers: list = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        torch.manual_seed(0)
        return nn.Sequential(*layers[:-1])

    rng = np.random.default_rng(rank)
    x = torch.tensor(rng.standard_normal((batch, sizes[0])), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, sizes[-1], batch))
    loss_fn = nn.CrossEntropyLoss()

    def stepper(model):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def step() -> None:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()

        for _ in range(10):
            step()
        return step

    plain_times = []
    if world == 1:  # the same loop without DistributedDataParallel, for reference
        step = stepper(mlp())
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(steps):
                step()
            plain_times.append(time.perf_counter() - start)
    model = DistributedDataParallel(mlp(), bucket_cap_mb=bucket_cap_mb)
    reducer = model.reducer
    step = stepper(model)
    times, waits = [], []  # waits: (when backward's final wait began, how long it took) per step
    done_early = []  # buckets whose all-reduce was over before backward ended
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(steps):
            step()
            waits.append((reducer.last_wait_start, reducer.last_wait_s))
            done_early.append(reducer.last_done_early)
        dist.barrier()
        times.append(time.perf_counter() - start)

    # the same buckets all-reduced on their own, blocking, for the cost the overlap hides
    from mpi4py import MPI

    comm = reducer.comm
    flats = [b.flat for b in reducer.buckets]
    allreduce_times = []
    for _ in range(repeats * steps):
        comm.Barrier()
        start = time.perf_counter()
        for flat in flats:
            comm.Allreduce(MPI.IN_PLACE, flat, MPI.SUM)
        allreduce_times.append(time.perf_counter() - start)
    latency, bandwidth = measure_alpha_beta(comm, world) if world > 1 else (0.0, 0.0)
    # The rank that reaches the wait last waits only for the communication left (the others also wait for it);
    # perf_counter is one system-wide monotonic clock, so the ranks' start times compare on one machine.
    everyone = comm.gather(waits, root=0)
    exposed, skew = [], []
    if rank == 0:
        for step in zip(*everyone):
            starts = [start for start, _ in step]
            exposed.append(max(step)[1])
            skew.append(max(starts) - min(starts))
    data = model._get_ddp_logging_data()
    best = min(times)
    result = {
        "world": world,
        "sizes": list(sizes),
        "batch_per_rank": batch,
        "samples_per_s": world * batch * steps / best,
        "plain_samples_per_s": batch * steps / min(plain_times) if plain_times else None,
        "step_ms": 1e3 * best / steps,
        "bucket_bytes": data["bucket_sizes"],
        "bytes_per_step": data["comm_bytes_per_iteration"],
        "wait_ms": 1e3 * statistics.median(w for _, w in waits),
        "exposed_ms": 1e3 * statistics.median(exposed) if exposed else 0.0,
        "skew_ms": 1e3 * statistics.median(skew) if skew else 0.0,
        "buckets_done_early": sum(done_early) / len(done_early),
        "allreduce_ms": 1e3 * statistics.median(allreduce_times),
        "alpha_us": 1e6 * latency,
        "beta_gb_s": bandwidth / 1e9,
    }
    if rank == 0:
        print(json.dumps(result), flush=True)
    dist.destroy_process_group()


def measure_alpha_beta(comm, world: int) -> tuple[float, float]:
    """The ring model's per-step latency alpha (from an 8-byte all-reduce: 2(N-1) steps) and bandwidth beta
    (from a 4 MiB all-reduce, which moves 2(N-1)/N of its bytes through each rank)."""
    from mpi4py import MPI

    def median_time(array: np.ndarray, repeats: int) -> float:
        times = []
        for _ in range(repeats):
            comm.Barrier()
            start = time.perf_counter()
            comm.Allreduce(MPI.IN_PLACE, array, MPI.SUM)
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    steps = 2 * (world - 1)
    alpha = median_time(np.zeros(1), 200) / steps
    size = 4 * 1024 * 1024
    big = median_time(np.zeros(size // 4, np.float32), 20)
    beta = steps / world * size / max(big - steps * alpha, 1e-9)
    return alpha, beta


def launch(nproc: int, argv: list[str]) -> dict:
    """Run the workers on ``nproc`` ranks with one thread each; rank 0's JSON line."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    mpiexec = here if os.access(here, os.X_OK) else "mpiexec"
    env = dict(os.environ, **{name: "1" for name in THREAD_VARIABLES})
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    cmd = [mpiexec, "-n", str(nproc), sys.executable, os.path.abspath(__file__), "--worker", *argv]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def report(one: dict, two: dict) -> None:
    sizes = "-".join(map(str, one["sizes"]))
    print(f"{sizes} MLP, batch {one['batch_per_rank']} per rank, SGD with momentum, 1 thread per rank")
    for r in (one, two):
        print(f"  {r['world']} rank{'s' if r['world'] > 1 else ' '}: {r['samples_per_s']:9.0f} samples/s "
              f"({r['step_ms']:.2f} ms per step)")  # fmt: skip
    print(f"  (1 process without DistributedDataParallel: {one['plain_samples_per_s']:9.0f} samples/s)")
    print(f"  speedup 2 ranks / 1 rank: {two['samples_per_s'] / one['samples_per_s']:.2f}x (target >= 1.7x)")
    n = two["world"]
    ring = 2 * (n - 1) / n * two["bytes_per_step"]
    print(f"  all-reduced per step: {two['bytes_per_step']} bytes in {len(two['bucket_bytes'])} bucket(s) "
          f"{two['bucket_bytes']}; a ring all-reduce sends {ring:.0f} bytes per rank")  # fmt: skip
    if len(two["bucket_bytes"]) == 1:  # it starts when backward's last gradient arrives: nothing runs beside it
        hidden_text = "0% (one bucket, started by the last gradient of backward: nothing left to hide it behind)"
    else:
        hidden_text = f"{min(1.0, max(0.0, 1.0 - two['exposed_ms'] / two['allreduce_ms'])):.0%}"
    print(
        f"  all-reduce of the buckets on its own: {two['allreduce_ms']:.3f} ms; left to wait for after backward "
        f"(on the last rank to finish it): {two['exposed_ms']:.3f} ms; hidden behind backward: {hidden_text}"
    )
    print(f"  (median wait on rank 0: {two['wait_ms']:.3f} ms, of which waiting for the slower rank: "
          f"{two['skew_ms']:.3f} ms; buckets already all-reduced when backward ended: "
          f"{two['buckets_done_early']:.2f} of {len(two['bucket_bytes'])})")  # fmt: skip
    alpha, beta = two["alpha_us"] * 1e-6, two["beta_gb_s"] * 1e9
    print(f"  ring model here: alpha {1e6 * alpha:.1f} us per step, beta {beta / 1e9:.2f} GB/s; a bucket is 90% "
          f"bandwidth-bound from 9*N*alpha*beta = {9 * n * alpha * beta / 1024:.0f} KiB (N={n})")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help="run as one rank (started through mpiexec)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="layer widths (default 784,128,10)")
    parser.add_argument("--batch", type=int, default=BATCH, help="samples per rank per step (default 256)")
    parser.add_argument("--steps", type=int, default=20, help="steps per timed repeat (default 20)")
    parser.add_argument("--repeats", type=int, default=10, help="timed repeats; the fastest counts (default 10)")
    parser.add_argument("--bucket-cap-mb", type=float, default=None, help="DDP bucket_cap_mb (default: torch's)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="1-rank and 2-rank runs alternate this many times; the best of each counts (default 3)",
    )
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(","))
    if args.worker:
        worker(sizes, args.batch, args.steps, args.repeats, args.bucket_cap_mb)
        return
    forward = ["--sizes", args.sizes, "--batch", str(args.batch), "--steps", str(args.steps),
               "--repeats", str(args.repeats)] + ([] if args.bucket_cap_mb is None else
                                                  ["--bucket-cap-mb", str(args.bucket_cap_mb)])  # fmt: skip
    ones, twos = [], []
    for _ in range(args.rounds):  # alternating, so that both see the same load on a shared machine
        ones.append(launch(1, forward))
        twos.append(launch(2, forward))
    report(max(ones, key=lambda r: r["samples_per_s"]), max(twos, key=lambda r: r["samples_per_s"]))


if __name__ == "__main__":
    main()
