"""``python -m numbagrad.distributed.run`` and what importing the package does (no MPI needed for most)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from numbagrad.distributed import run as launcher

PROGRAMS = Path(__file__).parent / "programs"
SRC = Path(__file__).resolve().parents[2] / "src"


def python(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_importing_numbagrad_and_its_distributed_parts_does_not_import_mpi4py():
    out = python(
        "import sys, numbagrad, numbagrad.nn, numbagrad.distributed, numbagrad.nn.parallel\n"
        "print('mpi4py' in sys.modules, numbagrad.nn.parallel.DistributedDataParallel.__name__)"
    )
    assert out.split() == ["False", "DistributedDataParallel"]


def test_is_available_finds_mpi4py_without_importing_it():
    pytest.importorskip("mpi4py")
    out = python("import sys, numbagrad.distributed as d\nprint(d.is_available(), 'mpi4py' in sys.modules)")
    assert out.split() == ["True", "False"]


def test_dry_run_prints_the_mpiexec_command_with_one_thread_per_rank(capsys):
    code = launcher.main(["--nproc", "3", "--threads-per-rank", "1", "--mpiexec", "/opt/mpi/bin/mpiexec",
                          "--dry-run", "train.py", "--epochs", "2"])  # fmt: skip
    out = capsys.readouterr().out.strip()
    assert code == 0
    env = {name: "1" for name in launcher.THREAD_VARIABLES}
    for name in launcher.THREAD_VARIABLES:
        if name in os.environ:
            env[name] = os.environ[name]  # variables already set are kept
    prefix = " ".join(f"{name}={env[name]}" for name in launcher.THREAD_VARIABLES)
    assert out == f"{prefix} /opt/mpi/bin/mpiexec -n 3 {sys.executable} train.py --epochs 2"


def test_threads_default_to_the_cores_shared_among_the_ranks_and_keep_what_is_set():
    env = launcher.thread_environment(2, environ={"OMP_NUM_THREADS": "3"})
    assert env["OMP_NUM_THREADS"] == "3"
    assert env["NUMBA_NUM_THREADS"] == str(max(1, (os.cpu_count() or 1) // 2))


def test_module_targets_run_with_dash_m():
    assert launcher.build_command(2, ["pkg.train", "-x"], module=True, mpiexec="mpiexec") == [
        "mpiexec", "-n", "2", sys.executable, "-m", "pkg.train", "-x"
    ]  # fmt: skip


def test_the_launcher_starts_nproc_ranks_with_the_scripts_arguments(tmp_path):
    pytest.importorskip("mpi4py")
    if launcher.find_mpiexec() is None:
        pytest.skip("mpiexec not found (pip install mpich)")
    env = {k: v for k, v in os.environ.items() if k not in launcher.THREAD_VARIABLES}
    env["PYTHONPATH"] = str(SRC)
    cmd = [sys.executable, "-m", "numbagrad.distributed.run", "--nproc", "2", "--threads-per-rank", "1",
           str(PROGRAMS / "launched.py"), str(tmp_path), "--flag", "value"]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for r in range(2):
        got = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert got == {"world": 2, "threads": {"OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"},
                       "argv": ["--flag", "value"]}  # fmt: skip


def test_the_ddp_spirals_example_keeps_the_ranks_weights_identical(tmp_path):
    pytest.importorskip("mpi4py")
    mpiexec = launcher.find_mpiexec()
    if mpiexec is None:
        pytest.skip("mpiexec not found (pip install mpich)")
    example = Path(__file__).resolve().parents[2] / "examples" / "ddp_spirals.py"
    env = dict(os.environ, PYTHONPATH=str(SRC), **{name: "1" for name in launcher.THREAD_VARIABLES})
    cmd = [mpiexec, "-n", "2", sys.executable, str(example), "--epochs", "2"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "weights identical on 2 ranks: True"
    assert lines[1].startswith("final accuracy: ")
