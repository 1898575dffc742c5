"""Generated kernels: nothing at import, the cache directory, warm-up, and serial == parallel."""

import os
import subprocess
import sys

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.backend import codegen, cpu
from numbagrad.scalar_math import ROWS


def run_python(code: str, **env) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def test_import_does_not_import_numba():
    assert run_python("import sys, numbagrad; print('numba' in sys.modules)") == "False"


def test_cache_dir_is_honoured(tmp_path):
    code = "import numbagrad as ng; x = ng.tensor([1.0, 2.0], dtype=ng.float64); print((x * x).tolist())"
    assert run_python(code, NUMBAGRAD_CACHE_DIR=str(tmp_path)) == "[1.0, 4.0]"
    generated = [p.name for p in tmp_path.iterdir() if p.suffix == ".py"]
    assert any(name.startswith("numbagrad_kernels_mul_forward_aa_") for name in generated)
    assert list(tmp_path.glob("__pycache__/*.nbi")), "Numba's index files live beside the generated source"


@pytest.mark.parametrize("name", ["mul", "sigmoid", "div"])
@pytest.mark.parametrize("which", ["forward", "grad0"])
def test_serial_and_parallel_kernels_agree_exactly(name, which):
    row = ROWS[name]
    rng = np.random.default_rng(0)
    n_operands = row.arity if which == "forward" else row.arity + 2
    operands = [rng.uniform(0.5, 2.0, 5000) for _ in range(n_operands)]
    pattern = "a" * n_operands
    serial, parallel = np.empty(5000), np.empty(5000)
    codegen.cpu_kernel(row, which, pattern, False)(serial, *operands)
    codegen.cpu_kernel(row, which, pattern, True)(parallel, *operands)
    np.testing.assert_array_equal(parallel, serial)


def test_size_picks_the_variant(monkeypatch):
    monkeypatch.setattr(cpu, "PARALLEL_THRESHOLD", 4)
    x = ng.tensor([1.0, 2.0, 3.0, 4.0], dtype=ng.float64)
    np.testing.assert_array_equal((x * x).numpy(), [1.0, 4.0, 9.0, 16.0])
    assert ("mul", "forward", "aa", True) in codegen._kernels


def test_accumulate_serial_and_parallel_agree():
    src = np.linspace(-1, 1, 3001)
    a, b = np.ones(3001), np.ones(3001)
    codegen.accumulate_kernel("serial")(a, src)
    codegen.accumulate_kernel("parallel")(b, src)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, 1 + src)


def test_warmup_compiles_the_kernels_backward_uses():
    ng.warmup(["mul"], dtypes=("float64",))
    for parallel in (False, True):
        assert ("mul", "forward", "aa", parallel) in codegen._kernels
        assert ("mul", "grad0", "asaa", parallel) in codegen._kernels  # g, out unused (scalar 0), x, y


def test_warmup_accepts_user_ops():
    op = ng.elementwise(lambda x: x * x, grads=[lambda g, out, x: 2 * g * x], name="square")
    ng.warmup([op], dtypes=("float64",))
    assert (op.row.name, "forward", "a", False) in codegen._kernels
