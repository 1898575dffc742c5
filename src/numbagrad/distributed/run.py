"""``python -m numbagrad.distributed.run --nproc 2 train.py [args]``: start a training script on N ranks of one
machine through ``mpiexec``, with each rank's thread pools sized so the ranks don't oversubscribe the cores.

It only builds and runs ``mpiexec -n N python train.py args`` (see ``--dry-run``); across machines, call your
cluster's ``srun`` or ``mpiexec`` directly (docs/distributed.md).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys

#: The thread pools a rank may start: OpenMP/BLAS (numpy's matmul) and Numba's parallel kernels.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def find_mpiexec() -> str | None:
    """The ``mpiexec`` beside this Python (the ``mpich`` wheel installs one there), else the first on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(here, os.X_OK):
        return here
    return shutil.which("mpiexec") or shutil.which("mpirun")


def build_command(nproc: int, target: list[str], module: bool = False, mpiexec: str | None = None) -> list[str]:
    """``[mpiexec, -n, N, python, (-m), target...]``."""
    if mpiexec is None:
        mpiexec = find_mpiexec()
        if mpiexec is None:
            raise FileNotFoundError(
                "mpiexec not found: install the extra (pip install 'numbagrad[distributed]', which brings mpich's "
                "mpiexec) or load your site's MPI"
            )
    return [mpiexec, "-n", str(nproc), sys.executable, *(["-m"] if module else []), *target]


def thread_environment(nproc: int, threads_per_rank: int | None = None, environ=None) -> dict:
    """``environ`` with each thread-pool variable that is not already set given ``threads_per_rank`` (by default
    the machine's cores divided among the ranks, at least 1)."""
    env = dict(os.environ if environ is None else environ)
    if threads_per_rank is None:
        threads_per_rank = max(1, (os.cpu_count() or 1) // nproc)
    for name in THREAD_VARIABLES:
        env.setdefault(name, str(threads_per_rank))
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m numbagrad.distributed.run",
        description="Run a training script on N ranks of this machine through mpiexec.",
    )
    parser.add_argument("--nproc", "--nproc-per-node", "--nproc_per_node", type=int, required=True,
                        help="number of processes (ranks)")  # fmt: skip
    parser.add_argument("--threads-per-rank", type=int, default=None,
                        help="threads per rank for OpenMP/BLAS/Numba when not already set in the environment "
                        "(default: cores // nproc, at least 1)")  # fmt: skip
    parser.add_argument("--mpiexec", default=None, help="the mpiexec to use (default: beside python, else PATH)")
    parser.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    parser.add_argument("-m", dest="module", action="store_true", help="run the target as a module (python -m)")
    parser.add_argument("target", help="the script (or module with -m)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    args = parser.parse_args(argv)
    if args.nproc < 1:
        parser.error("--nproc must be at least 1")
    try:
        cmd = build_command(args.nproc, [args.target, *args.args], args.module, args.mpiexec)
    except FileNotFoundError as e:
        parser.exit(2, f"{parser.prog}: error: {e}\n")
    env = thread_environment(args.nproc, args.threads_per_rank)
    if args.dry_run:
        threads = " ".join(f"{name}={env[name]}" for name in THREAD_VARIABLES)
        print(f"{threads} {shlex.join(cmd)}")
        return 0
    code = subprocess.call(cmd, env=env)
    return 128 - code if code < 0 else code  # killed by a signal: the shell's convention


if __name__ == "__main__":
    raise SystemExit(main())
