"""Generated kernels: nothing at import, the cache directory, warm-up, and serial == parallel."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.backend import codegen, cpu
from numbagrad.scalar_math import ROWS, chbevl, polevl


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
    codegen.row_kernel(row, which, pattern, "serial")(serial, *operands)
    codegen.row_kernel(row, which, pattern, "parallel")(parallel, *operands)
    np.testing.assert_array_equal(parallel, serial)


def test_size_picks_the_variant(monkeypatch):
    monkeypatch.setattr(cpu, "PARALLEL_THRESHOLD", 4)
    x = ng.tensor([1.0, 2.0, 3.0, 4.0], dtype=ng.float64)
    np.testing.assert_array_equal((x * x).numpy(), [1.0, 4.0, 9.0, 16.0])
    assert ("mul", "forward", "aa", "parallel") in codegen.KERNELS


def test_accumulate_serial_and_parallel_agree():
    src = np.linspace(-1, 1, 3001)
    a, b = np.ones(3001), np.ones(3001)
    codegen.accumulate_kernel("serial")(a, src)
    codegen.accumulate_kernel("parallel")(b, src)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, 1 + src)


def test_warmup_compiles_the_kernels_backward_uses():
    ng.warmup(["mul"], dtypes=("float64",))
    for target in ("serial", "parallel"):
        assert ("mul", "forward", "aa", target) in codegen.KERNELS
        assert ("mul", "grad0", "asaa", target) in codegen.KERNELS  # g, out unused (scalar 0), x, y


def test_warmup_accepts_user_ops():
    op = ng.elementwise(lambda x: x * x, grads=[lambda g, out, x: 2 * g * x], name="square")
    ng.warmup([op], dtypes=("float64",))
    assert (op.row.name, "forward", "a", "serial") in codegen.KERNELS


def test_every_loop_comes_from_loop_source():
    """The three variants of one body, as the generator writes them."""
    body = "res[i] = x[i] * 2"
    serial = codegen.loop_source("serial", "k", ["res", "x"], body, "res.shape[0]")
    parallel = codegen.loop_source("parallel", "k", ["res", "x"], body, "res.shape[0]")
    device = codegen.loop_source("cuda", "k", ["res", "x"], body, "res.shape[0]")
    assert serial == (
        "@njit(cache=CACHE, nogil=True, error_model='numpy')\n"
        "def k(res, x):\n"
        "    for i in range(res.shape[0]):\n"
        "        res[i] = x[i] * 2\n"
    )
    assert parallel == serial.replace("'numpy')", "'numpy', parallel=True)").replace("range(", "prange(")
    assert device == (
        "@cuda.jit(cache=CACHE)\n"
        "def k(res, x):\n"
        "    i = cuda.grid(1)\n"
        "    _stride = cuda.gridsize(1)\n"
        "    _n = res.shape[0]\n"
        "    while i < _n:\n"
        "        res[i] = x[i] * 2\n"
        "        i += _stride\n"
    )


def decorated(f):
    return f


@decorated
def twice_plus(x):
    return helper(x) + x


def helper(x):
    return x * math.exp(0.0)


def test_functions_source_copies_the_def_without_its_decorators():
    text = codegen.functions_source([twice_plus], "serial")
    assert text.startswith("@njit(cache=CACHE, error_model='numpy')\ndef twice_plus(x):\n")
    assert "@decorated" not in text
    assert codegen.functions_source([helper], "cuda", inline="always").startswith(
        "@cuda.jit(device=True, cache=CACHE)\ndef helper(x):"
    )
    assert "inline='always'" in codegen.functions_source([helper], "parallel", inline="always")


def test_copyable_takes_the_helpers_a_function_calls():
    assert codegen.copyable([twice_plus]) == [twice_plus, helper]
    assert codegen.copyable([lambda x: x]) is None
    scale = 2.0
    assert codegen.copyable([lambda x: x * scale]) is None
    assert codegen.copyable([uses_numpy]) is None  # np is not copied into generated files


def test_the_tables_fma_is_defined_in_modules_whose_functions_call_it():
    """``scalar_math.fma`` is not copied (its Python form is exact rational arithmetic): the module gets the
    processor's fused multiply-add under that name."""
    assert codegen.copyable([chbevl]) == [chbevl]
    assert codegen.functions_source([chbevl], "serial").startswith(codegen.FMA_SOURCE["cpu"])
    assert codegen.functions_source([chbevl], "cuda").startswith(codegen.FMA_SOURCE["cuda"])
    assert "def fma" not in codegen.functions_source([twice_plus, helper], "serial")


def test_generated_fma_rounds_once():
    source = codegen.module_source("serial", codegen.functions_source([polevl], "serial"))
    a = 1.0 + 2.0**-30
    # polevl(a, (a, c)) is fma(a, a, c): a * a + c rounded once keeps the 2 ** -60 that a * a rounds off
    assert codegen.load_module("test_fma", source).polevl(a, (a, -(a * a))) == 2.0**-60


def test_static_foreach_flags_are_literals_in_the_generated_loop():
    from numbagrad.optim._updates import rmsprop_update

    kernel = codegen.foreach_kernel(rmsprop_update, 5, 7, "serial", (True, False))
    source = open(kernel.py_func.__code__.co_filename).read()
    assert "rmsprop_update(i, a0, a1, a2, a3, a4, s0, s1, s2, s3, s4, s5, s6, True, False)" in source
    assert os.path.basename(kernel.py_func.__code__.co_filename).startswith(
        codegen.PREFIX + "foreach_rmsprop_update_serial_10_"
    )
    with pytest.raises(TypeError, match="static values must be bools or ints"):
        codegen.foreach_kernel(rmsprop_update, 5, 7, "serial", (0.5,))


def uses_numpy(x):
    return np.sin(x)


def test_foreach_serial_and_parallel_loops_agree(monkeypatch):
    from numbagrad.optim._updates import adam_update

    rng = np.random.default_rng(0)
    results = []
    for threshold in (1 << 30, 1):
        monkeypatch.setattr(cpu, "PARALLEL_THRESHOLD", threshold)
        p, g, m, v = (rng.uniform(0.1, 1.0, 2001) for _ in range(4))
        arrays = [p.copy(), g, m.copy(), v.copy(), v.copy()]
        cpu.foreach(adam_update, arrays, (-0.01, 0.1, 0.9, 0.999, 0.001, 1e-8, 0.0, 1.0, False, 0.5, False), (True,))
        results.append(arrays)
        rng = np.random.default_rng(0)
    assert ("foreach", adam_update, 5, 11, "parallel", (True,)) in codegen.KERNELS
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


REDUCE_BODY = "v = x[i] * x[i]\ntotal += v\npeak = max(peak, v)"


@pytest.mark.parametrize("target", ["serial", "parallel"])
def test_loop_source_closing_reductions_on_the_cpu(target):
    loop = codegen.loop_source(
        target, "kernel", ["x", "out"], REDUCE_BODY, "x.shape[0]",
        reduce=(("total", "+"), ("peak", "max")), epilogue="out[0] = total\nout[1] = peak",
    )  # fmt: skip
    assert "fastmath={'reassoc'}" in loop and "    total = 0.0\n    peak = -math.inf\n" in loop
    kernel = codegen.load_module(f"test_reduce_{target}", codegen.module_source(target, loop)).kernel
    x, out = np.linspace(-2.0, 1.0, 1001), np.empty(2)
    kernel(x, out)
    np.testing.assert_allclose(out, [(x * x).sum(), 4.0], rtol=1e-12)
