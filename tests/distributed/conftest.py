"""Run small programs under ``mpiexec -n 2`` and read back what each rank recorded.

Each program in ``programs/`` writes ``rank<r>.json`` into the directory given as its first argument; the tests
compare those values with ones computed here. The tests skip when mpi4py or mpiexec is missing (install the
``distributed`` extra: ``pip install -e '.[distributed]'``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).parent / "programs"
SRC = Path(__file__).resolve().parents[2] / "src"


def find_mpiexec() -> str | None:
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if os.access(here, os.X_OK) else shutil.which("mpiexec")


class Run:
    """A finished mpiexec job: exit status, output, seconds taken, and each rank's recorded results."""

    def __init__(self, proc: subprocess.CompletedProcess, outdir: Path, seconds: float) -> None:
        self.returncode = proc.returncode
        self.output = proc.stdout + proc.stderr
        self.seconds = seconds
        self.outdir = outdir

    def rank(self, r: int) -> dict:
        path = self.outdir / f"rank{r}.json"
        assert path.exists(), f"rank {r} recorded nothing; output:\n{self.output}"
        return json.loads(path.read_text())


@pytest.fixture(scope="session")
def mpirun(tmp_path_factory):
    """``mpirun(program, *args, n=2, timeout=120, env={})`` runs ``programs/<program>`` on n ranks."""
    pytest.importorskip("mpi4py")
    mpiexec = find_mpiexec()
    if mpiexec is None:
        pytest.skip("mpiexec not found (pip install mpich)")

    def run(program: str, *args: str, n: int = 2, timeout: float = 120, env: dict | None = None) -> Run:
        environ = dict(os.environ)
        environ["PYTHONPATH"] = os.pathsep.join([str(SRC), environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            environ[name] = "1"  # one thread per rank: the ranks share the machine's cores
        environ.update(env or {})
        outdir = tmp_path_factory.mktemp(Path(program).stem)
        cmd = [mpiexec, "-n", str(n), sys.executable, str(PROGRAMS / program), str(outdir), *args]
        start = time.monotonic()
        proc = subprocess.run(cmd, env=environ, capture_output=True, text=True, timeout=timeout)
        return Run(proc, outdir, time.monotonic() - start)

    return run
