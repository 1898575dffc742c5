"""The kernel cache repairs itself: each fault in its own cache directory, ``numbagrad.cache`` info/clear and its
command line, concurrent processes, and the compile log.

A "new process" is simulated in-process by forgetting every loaded kernel module (``fresh_process``): the next
call executes the generated module again and its Numba dispatchers read the disk cache, as a new process would.
Tests that need a real new process (the CLI, concurrency, a crash-free later run) use subprocesses.
"""

import glob
import logging
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import numbagrad
from numbagrad import cache
from numbagrad.backend import codegen, row_products
from numbagrad.scalar_math import ROWS

X = np.array([1.0, -2.0, 3.5])


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """An empty cache directory for this test, and a process that has loaded no kernel module yet."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("NUMBAGRAD_CACHE_DIR", str(directory))
    fresh_process(monkeypatch)
    return directory


def fresh_process(monkeypatch) -> None:
    for name in ("KERNELS", "_usable"):
        monkeypatch.setattr(codegen, name, {})
    monkeypatch.setattr(codegen, "_warned", set())


def neg(x: np.ndarray) -> np.ndarray:
    """Run the generated ``neg`` forward kernel (serial) on ``x``."""
    res = np.empty_like(x)
    codegen.row_kernel(ROWS["neg"], "forward", "a", "serial")(res, x)
    return res


def kernel_files(directory, pattern: str) -> list[str]:
    return glob.glob(str(directory / "__pycache__" / f"{codegen.PREFIX}neg_forward_a_*.kernel-*.{pattern}"))


def populate(directory, monkeypatch) -> None:
    """Compile the kernel into ``directory`` (float64), then forget it, as a finished process would."""
    np.testing.assert_array_equal(neg(X), -X)
    assert kernel_files(directory, "nbi") and kernel_files(directory, "nbc")
    fresh_process(monkeypatch)


def assert_repaired_once(directory, monkeypatch, caplog) -> None:
    """The next process gets the right result with one warning naming the directory; the one after loads the
    rebuilt entry from the disk cache, silently."""
    with pytest.warns(
        codegen.KernelCacheWarning, match=f"removed damaged entries from the kernel cache in {directory}"
    ):
        np.testing.assert_array_equal(neg(X), -X)
    fresh_process(monkeypatch)
    with warnings.catch_warnings(), caplog.at_level(logging.DEBUG, logger="numbagrad"):
        warnings.simplefilter("error")
        np.testing.assert_array_equal(neg(X), -X)
    assert any("neg_forward_a.kernel" in r.message and "from the disk cache" in r.message for r in caplog.records)


# --- damaged entries ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
@pytest.mark.parametrize("kind", ["nbi", "nbc"])
def test_damaged_numba_index_or_data_file_is_removed_and_rebuilt(cache_dir, monkeypatch, caplog, kind, damage):
    populate(cache_dir, monkeypatch)
    for path in kernel_files(cache_dir, kind):
        data = open(path, "rb").read()
        with open(path, "wb") as f:
            f.write({"truncated": data[: len(data) // 2], "garbage": b"\x80\x05garbage", "empty": b""}[damage])
    assert_repaired_once(cache_dir, monkeypatch, caplog)


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_damaged_generated_source_file_is_rewritten(cache_dir, monkeypatch, caplog, damage):
    populate(cache_dir, monkeypatch)
    (path,) = glob.glob(str(cache_dir / f"{codegen.PREFIX}neg_forward_a_*.py"))
    source = open(path).read()
    with open(path, "w") as f:
        f.write(source[: len(source) // 2] if damage == "truncated" else "def kernel(:\n")
    with pytest.warns(codegen.KernelCacheWarning, match=f"in {cache_dir} .*did not match its hash"):
        np.testing.assert_array_equal(neg(X), -X)
    assert open(path).read() == source
    fresh_process(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(neg(X), -X)


def test_an_entry_holding_another_signature_is_rebuilt(cache_dir, monkeypatch, caplog):
    """Two processes racing to write one index can leave it naming the other's data file: detected, rebuilt."""
    np.testing.assert_array_equal(neg(X), -X)
    np.testing.assert_array_equal(neg(X.astype(np.float32)), -X.astype(np.float32))
    first, second = sorted(kernel_files(cache_dir, "nbc"))
    os.replace(first, first + ".swap")
    os.replace(second, first)
    os.replace(first + ".swap", second)
    fresh_process(monkeypatch)
    assert_repaired_once(cache_dir, monkeypatch, caplog)


def test_one_warning_per_directory_however_many_entries_are_damaged(cache_dir, monkeypatch):
    np.testing.assert_array_equal(neg(X), -X)
    res = np.empty_like(X)
    codegen.row_kernel(ROWS["exp"], "forward", "a", "serial")(res, X)
    fresh_process(monkeypatch)
    for path in glob.glob(str(cache_dir / "__pycache__" / "*.nbi")):
        with open(path, "wb") as f:
            f.write(b"garbage")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.testing.assert_array_equal(neg(X), -X)
        codegen.row_kernel(ROWS["exp"], "forward", "a", "serial")(res, X)
    np.testing.assert_allclose(res, np.exp(X))
    assert [w.category for w in caught] == [codegen.KernelCacheWarning]


def test_a_later_process_does_not_crash_on_a_damaged_index(tmp_path):
    """The failure the issue reports, end to end: every run after the damage used to raise UnpicklingError."""
    env = {"NUMBAGRAD_CACHE_DIR": str(tmp_path)}
    code = "import numbagrad as ng; print((-ng.tensor([1.0, 2.0], dtype=ng.float64)).tolist())"
    assert run_python(code, env).stdout.strip() == "[-1.0, -2.0]"
    for path in glob.glob(str(tmp_path / "__pycache__" / "*.nbi")):
        with open(path, "wb") as f:
            f.write(b"\x80\x04not a pickle")
    result = run_python(code, env)
    assert result.stdout.strip() == "[-1.0, -2.0]"
    assert result.stderr.count("KernelCacheWarning") == 1 and str(tmp_path) in result.stderr


# --- unusable directories -----------------------------------------------------------------------------------
def test_uncreatable_directory_compiles_in_memory_with_one_warning(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("NUMBAGRAD_CACHE_DIR", str(blocker / "cache"))
    fresh_process(monkeypatch)
    with pytest.warns(codegen.KernelCacheWarning, match=f"{blocker / 'cache'} cannot be used .*in memory") as caught:
        np.testing.assert_array_equal(neg(X), -X)
        res = np.empty_like(X)
        codegen.row_kernel(ROWS["exp"], "forward", "a", "serial")(res, X)
    assert len(caught) == 1
    np.testing.assert_allclose(res, np.exp(X))


def test_unwritable_directory_compiles_in_memory_with_one_warning(tmp_path, monkeypatch):
    if os.geteuid() == 0:  # root writes through permission bits: use a directory no one can write into
        directory = "/proc/self"
        if not os.path.isdir(directory):
            pytest.skip("needs /proc (Linux) when run as root")
    else:
        directory = str(tmp_path / "read-only")
        os.mkdir(directory, 0o555)
    monkeypatch.setenv("NUMBAGRAD_CACHE_DIR", directory)
    fresh_process(monkeypatch)
    with pytest.warns(codegen.KernelCacheWarning, match=f"{directory} cannot be used"):
        np.testing.assert_array_equal(neg(X), -X)
    assert not glob.glob(os.path.join(directory, codegen.PREFIX + "*"))


def test_generated_kernels_never_land_in_the_package(tmp_path):
    """Accumulation, optimizer and apply_ kernels are cached in the cache directory, not in numbagrad's tree."""
    package = os.path.dirname(numbagrad.__file__)
    before = set(glob.glob(os.path.join(package, "**", "*.nb[ic]"), recursive=True))
    (tmp_path / "user_fns.py").write_text("def halve(v):\n    return v / 2\n")
    code = (
        "import numbagrad as ng, user_fns\n"
        "w = ng.nn.Parameter(ng.tensor([1.0, 2.0]))\n"
        "for opt in (ng.optim.SGD([w], lr=0.1, momentum=0.9), ng.optim.Adam([w])):\n"
        "    for _ in range(2):\n"
        "        (w * w).sum().backward()  # the second backward accumulates into w.grad\n"
        "        opt.step()\n"
        "w.detach().apply_(user_fns.halve)\n"
    )
    cache_dir = tmp_path / "cache"
    run_python(
        code,
        {
            "NUMBAGRAD_CACHE_DIR": str(cache_dir),
            "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        },
    )
    assert set(glob.glob(os.path.join(package, "**", "*.nb[ic]"), recursive=True)) == before
    compiled = os.listdir(cache_dir / "__pycache__")
    for kernel in (
        "accumulate_serial",
        "foreach_sgd_update_serial",
        "foreach_adam_update_serial",
        "apply_halve_serial",
    ):
        assert any(name.startswith(codegen.PREFIX + kernel) and name.endswith(".nbi") for name in compiled), kernel


# --- concurrent processes -----------------------------------------------------------------------------------
def test_concurrent_processes_compiling_into_one_empty_cache_agree(tmp_path):
    """Two processes compile the same kernels, for two dtypes (two entries of one index), at the same time."""
    code = (
        "import numbagrad as ng\n"
        "for dt in (ng.float64, ng.float32):\n"
        "    x = ng.tensor([0.5, -1.0, 2.0], dtype=dt)\n"
        "    print((-x).tolist(), (x * x).tolist())\n"
    )
    env = {**os.environ, "NUMBAGRAD_CACHE_DIR": str(tmp_path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outputs]
    expected = ["[-0.5, 1.0, -2.0] [0.25, 1.0, 4.0]"] * 2
    assert [out.splitlines() for out, _ in outputs] == [expected] * 2
    later = run_python(code, {"NUMBAGRAD_CACHE_DIR": str(tmp_path)})
    assert later.stdout.splitlines() == expected and "Warning" not in later.stderr


# --- numbagrad.cache ----------------------------------------------------------------------------------------
def test_info_counts_what_a_run_cached_and_clear_empties_it(cache_dir, monkeypatch):
    assert cache.info() == {"directory": str(cache_dir), "modules": 0, "numba_files": 0, "bytes": 0}
    neg(X)
    info = cache.info()
    assert info["modules"] == 1 and info["numba_files"] == 2  # index + data of the kernel (neg is inlined into it)
    assert info["bytes"] == sum(os.path.getsize(p) for p in glob.glob(str(cache_dir / "**" / "*.*"), recursive=True))
    assert cache.clear() == 3
    assert cache.info()["modules"] == 0 and cache.info()["numba_files"] == 0
    fresh_process(monkeypatch)
    np.testing.assert_array_equal(neg(X), -X)  # compiles again


def test_command_line_info_and_clear(cache_dir):
    neg(X)
    env = {"NUMBAGRAD_CACHE_DIR": str(cache_dir)}
    info = run_python(None, env, "-m", "numbagrad.cache", "--info").stdout
    assert f"directory:   {cache_dir}\nmodules:     1\nnumba files: 2\n" in info
    cleared = run_python(None, env, "-m", "numbagrad.cache", "--clear").stdout
    assert cleared.startswith("removed 3 files (") and cleared.strip().endswith(f"from {cache_dir}")
    assert cache.info()["modules"] == 0


def test_info_follows_numba_cache_dir(tmp_path, monkeypatch):
    """With NUMBA_CACHE_DIR set, Numba keeps its files there (one folder per source directory)."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    env = {"NUMBAGRAD_CACHE_DIR": str(tmp_path / "ng"), "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    run_python("import numbagrad as ng; -ng.tensor([1.0], dtype=ng.float64)", env)
    assert cache.info(str(tmp_path / "ng"))["numba_files"] == 2
    assert not (tmp_path / "ng" / "__pycache__").exists() or not os.listdir(tmp_path / "ng" / "__pycache__")


# --- the compile log ----------------------------------------------------------------------------------------
def test_compilations_are_logged_with_their_time_and_a_first_time_note(cache_dir, monkeypatch, caplog):
    monkeypatch.setattr(codegen, "_announced", False)
    with caplog.at_level(logging.DEBUG, logger="numbagrad"):
        neg(X)
        res = np.empty_like(X)
        codegen.row_kernel(ROWS["exp"], "forward", "a", "serial")(res, X)
    infos = [r.message for r in caplog.records if r.levelno == logging.INFO]
    assert infos == [f"compiling Numba kernels for the first time; later runs load them from {cache_dir}"]
    compiled = [r.message for r in caplog.records if r.levelno == logging.DEBUG and r.message.startswith("compiled")]
    assert any(m.startswith("compiled kernel neg_forward_a.kernel(array(float64, 1d, C)") for m in compiled)
    assert any(m.startswith("compiled kernel exp_forward_a.kernel(") for m in compiled)
    assert all(m.endswith(" s") and float(m.split(" in ")[-1][:-2]) > 0 for m in compiled)
    assert {r.name for r in caplog.records} == {"numbagrad"}


def run_python(code, env: dict, *args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, *(args or ("-W", "default", "-c", code))]
    result = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result


_FEATURES_AFTER_A_KERNEL = """
import numbagrad
numbagrad.ones(3) * 2
from numba.core import registry
print(registry.cpu_target.target_context.codegen()._tm_features)
"""


@pytest.mark.skipif(not row_products.measured_host(), reason="the preference is LLVM's for AVX-512 hosts only")
def test_numbagrad_kernels_use_the_whole_avx512_width():
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")}
    result = subprocess.run([sys.executable, "-c", _FEATURES_AFTER_A_KERNEL], env=env, capture_output=True,
                            text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(",-prefer-256-bit")


def test_the_users_own_numba_cpu_features_are_kept():
    chosen = codegen.host_cpu()[1].flatten()
    result = run_python(_FEATURES_AFTER_A_KERNEL, {"NUMBA_CPU_FEATURES": chosen})
    assert result.stdout.strip() == chosen
