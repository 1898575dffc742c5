"""What a new user meets first: the license, the typing marker in the wheel, the README's example, its account of
the tests that skip without torch, and its asv steps, which must work as written and publish graphs."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _env(**extra: str) -> dict:
    """This interpreter's environment, with this checkout's ``src`` importable (as after ``pip install -e .``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


# --- license and typing ------------------------------------------------------------------------------------------


def test_license_file_is_the_bsd_3_clause_license_pyproject_declares():
    project = _pyproject()["project"]
    assert project["license"] == "BSD-3-Clause"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License\n")
    assert "3. Neither the name of the copyright holder nor the names of its" in text
    assert "THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS" in text


def test_built_wheel_ships_py_typed_and_the_license(tmp_path):
    """Build a wheel from a copy of the sources (offline: the installed setuptools) and list it."""
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip("building needs setuptools >= 77 (pyproject's build requirement)")
    source = tmp_path / "src-copy"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            str(source),
            "-w",
            str(wheels),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("numbagrad-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "numbagrad/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: BSD-3-Clause" in metadata


def test_py_typed_marks_the_package_for_type_checkers():
    import numbagrad

    assert (Path(numbagrad.__file__).parent / "py.typed").is_file()
    assert "py.typed" in _pyproject()["tool"]["setuptools"]["package-data"]["numbagrad"]


# --- the README's example and tests ------------------------------------------------------------------------------


def test_the_readme_example_prints_its_result():
    commands = re.findall(r"`python (examples/\S+\.py)`", README)
    assert commands, "the README points newcomers at an example program"
    for path in commands:
        run = subprocess.run([sys.executable, path], cwd=ROOT, capture_output=True, text=True, timeout=120, env=_env())
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip(), f"{path} prints nothing"
        assert run.stdout == (ROOT / path).with_suffix(".out").read_text()


def test_the_readme_says_how_to_run_the_tests_that_skip_without_torch():
    assert "pip install torch==2.13.0" in README
    assert "could not import 'torch'" in README  # the reason pytest -rs shows
    assert "python -m pytest -rs" in README


def test_torch_comparisons_skip_cleanly_without_torch():
    """The README's account, checked on one file: with torch unimportable, exactly its ``torch``-marked tests skip,
    with the reason the README quotes, and the rest pass."""
    target = "tests/test_lr_scheduler.py"
    marked = subprocess.run(
        [sys.executable, "-m", "pytest", target, "-m", "torch", "--collect-only", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=_env(),
    )  # fmt: skip
    n_marked = len([line for line in marked.stdout.splitlines() if "::" in line])
    assert n_marked > 10
    blocked = (
        "import sys, pytest; sys.modules['torch'] = None; "
        f"sys.exit(pytest.main(['{target}', '-rs', '-p', 'no:cacheprovider']))"
    )
    run = subprocess.run([sys.executable, "-c", blocked], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env=_env())  # fmt: skip
    assert run.returncode == 0, run.stdout
    assert re.search(rf"^\d+ passed, {n_marked} skipped in ", run.stdout, flags=re.MULTILINE), run.stdout
    skips = re.findall(r"^SKIPPED \[(\d+)\] [^:]+:\d+: (.*)$", run.stdout, flags=re.MULTILINE)
    assert sum(int(n) for n, _ in skips) == n_marked
    assert {reason.split(":")[0] for _, reason in skips} == {"could not import 'torch'"}


# --- asv ---------------------------------------------------------------------------------------------------------


def _count_constructions(monkeypatch) -> dict:
    """Counts nn.Module and Optimizer constructions (numbagrad's) from now on."""
    import numbagrad

    counts = {"modules": 0, "optimizers": 0}
    for cls, key in ((numbagrad.nn.Module, "modules"), (numbagrad.optim.Optimizer, "optimizers")):
        original = cls.__init__

        def counting(self, *args, _original=original, _key=key, **kwargs):
            counts[_key] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", counting)
    return counts


def test_the_training_benchmark_builds_its_model_in_setup(monkeypatch):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        bench_training = importlib.import_module("bench_training")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    counts = _count_constructions(monkeypatch)
    bench = bench_training.TrainingStep()
    bench.setup("numbagrad")
    assert counts["modules"] > 0 and counts["optimizers"] == 1
    before = dict(counts)
    bench.time_training_step("numbagrad")
    assert counts == before


def test_no_asv_benchmark_is_a_bare_function_that_would_build_state_while_timed():
    """Module-level ``time_*`` functions have no per-benchmark ``setup``: every suite is a class with one."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        for path in sorted((ROOT / "benchmarks").glob("bench_*.py")):
            module = importlib.import_module(path.stem)
            assert not [n for n in vars(module) if n.startswith(("time_", "timeraw_", "mem_", "peakmem_"))], path
            suites = [c for c in vars(module).values() if isinstance(c, type) and c.__module__ == module.__name__]
            for suite in suites:
                timed = [n for n in vars(suite) if n.startswith("time_")]
                if timed:
                    assert "setup" in vars(suite), f"{path.name}: {suite.__name__} times without a setup"
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def _readme_asv_commands() -> list[str]:
    block = re.search(r"```bash\n((?:.*\n)*?)```", README[README.index("## Benchmarks") :]).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


def test_the_readme_asv_steps_run_and_publish_graphs(tmp_path):
    """The README's asv commands, run as written on a fresh machine (a new HOME, a new repository on ``main`` with
    this checkout's asv configuration and benchmarks), except that ``pip install`` is skipped (numbagrad is importable
    here) and the run is narrowed to one quick suite; ``asv publish`` must then write graph data for the commit."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    asv = shutil.which("asv") or str(Path(sys.executable).parent / "asv")
    if not Path(asv).exists():
        pytest.skip("asv is not installed (pip install -e '.[bench]')")
    commands = _readme_asv_commands()
    assert commands[0].startswith("pip install") and commands[1] == "asv machine --yes"
    assert commands[2] == "asv run --python=same --quick --set-commit-hash $(git rev-parse HEAD)"
    assert commands[3:5] == ["asv publish", "asv preview"]

    repo, home = tmp_path / "repo", tmp_path / "home"
    home.mkdir()
    shutil.copytree(ROOT / "benchmarks", repo / "benchmarks", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "asv.conf.json", repo / "asv.conf.json")
    git_user = {f"GIT_{who}_{what}": "t" for who in ("AUTHOR", "COMMITTER") for what in ("NAME", "EMAIL")}
    env = _env(HOME=str(home), PATH=os.pathsep.join([str(Path(asv).parent), os.environ.get("PATH", "")]), **git_user)
    # asv's benchmark runner removes PYTHONPATH's entries from sys.path (dropping an editable install of this same
    # checkout with them); ASV_PYTHONPATH is how asv is told to add a path
    env["ASV_PYTHONPATH"] = env.pop("PYTHONPATH")

    def sh(command: str) -> str:
        run = subprocess.run(command, shell=True, cwd=repo, capture_output=True, text=True, timeout=300, env=env)
        assert run.returncode == 0, f"{command}\n{run.stdout}\n{run.stderr}"
        return run.stdout

    sh("git init -q -b main . && git add -A && git commit -q -m benchmarks")
    for command in commands[1:4]:
        if command.startswith("asv run"):
            command += " --bench Import"  # one quick suite: a fresh-process import
        sh(command)
    head = sh("git rev-parse HEAD").strip()
    results = list((repo / ".asv" / "results").rglob(f"{head[:8]}-*.json"))
    assert results, "asv run saved no results"
    graphs = [p for p in (repo / ".asv" / "html" / "graphs").rglob("*.json") if "branch-main" in str(p)]
    assert graphs, "asv publish wrote no graphs"
    index = json.loads((repo / ".asv" / "html" / "index.json").read_text())
    assert head in index["revision_to_hash"].values()
    points = json.loads(next(p for p in graphs if p.name == "bench_kernels.Import.timeraw_import.json").read_text())
    assert len(points) == 1 and points[0][1] > 0
