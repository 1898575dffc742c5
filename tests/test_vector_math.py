"""The CPU kernels' vectorizable exp, tanh, log (log2, log10), log1p, expm1, erf, sinh, cosh, atan (atan2), asin
and acos (``backend.vector_math``) and the rows built on them, against torch.

Extremes (+-1e4, +-100, +-inf, nan, +-0) are where a rewritten exp or a branch-free formula goes wrong (inf/inf,
overflow, lost subnormals), so every exp-based row is compared with torch there, forward and gradient, in both
float dtypes. numbagrad runs 17 copies of a value (the vectorized loop body and its remainder); torch one element.
"""

import inspect
import math
import re
import sys

import numba
import numpy as np
import pytest

import numbagrad as ng
import numbagrad.nn.functional as NF
from numbagrad.backend import codegen, vector_math
from numbagrad.scalar_math import ROWS

EXTREMES = [-1e4, -100.0, -88.5, -20.0, -1.5, -0.0, 0.0, 1.5, 20.0, 88.5, 100.0, 1e4, -math.inf, math.inf, math.nan]
DTYPES = ["float32", "float64"]

# (name, numbagrad function, the torch function's path under torch)
FUNCTIONS = [
    ("exp", ng.exp, "exp"),
    ("tanh", ng.tanh, "tanh"),
    ("sigmoid", ng.sigmoid, "sigmoid"),
    ("silu", NF.silu, "nn.functional.silu"),
    ("softplus", NF.softplus, "nn.functional.softplus"),
    ("elu", NF.elu, "nn.functional.elu"),
    ("mish", NF.mish, "nn.functional.mish"),
    ("gelu", NF.gelu, "nn.functional.gelu"),
    ("gelu_tanh", lambda x: NF.gelu(x, approximate="tanh"), "nn.functional.gelu"),
    ("logsigmoid", NF.logsigmoid, "nn.functional.logsigmoid"),
    ("log", ng.log, "log"),
    ("log1p", ng.log1p, "log1p"),
    ("expm1", ng.expm1, "expm1"),
    ("erf", ng.erf, "erf"),
    ("selu", NF.selu, "nn.functional.selu"),
]
IDS = [f[0] for f in FUNCTIONS]


def torch_function(torch, name: str, path: str):
    fn = torch
    for part in path.split("."):
        fn = getattr(fn, part)
    return (lambda x: fn(x, approximate="tanh")) if name == "gelu_tanh" else fn


def assert_like_torch(ours: np.ndarray, theirs: float, dtype: str, zero_sign: bool = True) -> None:
    """Within 8 ulp; subnormal results may differ."""
    info = np.finfo(dtype)
    expected = np.full_like(ours, theirs)
    np.testing.assert_allclose(ours, expected, rtol=8 * info.eps, atol=info.tiny, equal_nan=True)
    if zero_sign and theirs == 0:
        assert (np.signbit(ours) == np.signbit(expected)).all(), (ours, theirs)


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between same-signed floats of one dtype."""
    ints = np.int32 if a.dtype == np.float32 else np.int64
    return np.abs(a.view(ints).astype(np.int64) - b.view(ints).astype(np.int64))


@pytest.mark.parametrize("value", EXTREMES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "ours", "theirs"), FUNCTIONS, ids=IDS)
def test_forward_matches_torch_at_extremes(torch, name, ours, theirs, dtype, value):
    theirs = torch_function(torch, name, theirs)
    out = ours(ng.tensor(np.full(17, value, dtype=dtype))).numpy()
    assert out.dtype == np.dtype(dtype)
    assert_like_torch(out, theirs(torch.tensor(value, dtype=getattr(torch, dtype))).item(), dtype)


@pytest.mark.parametrize("value", EXTREMES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "ours", "theirs"), FUNCTIONS, ids=IDS)
def test_gradient_matches_torch_at_extremes(torch, name, ours, theirs, dtype, value):
    theirs = torch_function(torch, name, theirs)
    x = ng.tensor(np.full(17, value, dtype=dtype), requires_grad=True)
    ours(x).sum().backward()
    tx = torch.tensor(value, dtype=getattr(torch, dtype), requires_grad=True)
    theirs(tx).backward()
    # float32 gradients run partly in float64 (literals are float64): a zero's sign may differ from torch's
    assert_like_torch(x.grad.numpy(), tx.grad.item(), dtype, zero_sign=False)


@pytest.mark.parametrize(("dtype", "values"), [("float32", [-87.0, -87.5, -88.5, -88.8, -90.0, -100.0, -104.0]),
                                               ("float64", [-700.0, -709.0, -710.0, -745.0, -800.0])])  # fmt: skip
def test_sigmoid_where_exp_of_minus_x_overflows_is_torchs(torch, dtype, values):
    """torch's ``1 / (1 + exp(-x))``: subnormal results down to where ``exp(-x)`` overflows, then 0 (17 copies:
    the vectorized loop and its remainder)."""
    x = np.repeat(np.array(values, dtype=dtype), 17)
    expected = torch.sigmoid(torch.tensor(x)).numpy()
    assert (expected[-17:] == 0).all()
    assert (ng.sigmoid(ng.tensor(x)).numpy().view(np.uint8) == expected.view(np.uint8)).all()


@pytest.mark.parametrize(("dtype", "max_ulps"), [("float32", 0), ("float64", 2)])
def test_exp_within_2_ulp_over_its_whole_range_and_float32_correctly_rounded(dtype, max_ulps):
    lo, hi = (-104.0, 89.0) if dtype == "float32" else (-746.0, 710.0)
    x = np.linspace(lo, hi, 1_000_003).astype(dtype)
    expected = np.exp(x.astype(np.longdouble)).astype(dtype)
    assert ulps(ng.exp(ng.tensor(x)).numpy(), expected).max() <= max_ulps


def test_float32_exp_prints_like_torch(torch):
    x = [4.0, 1.0, -3.0]
    assert repr(ng.exp(ng.tensor(x))) == repr(torch.exp(torch.tensor(x)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_tanh_within_2_ulp(dtype):
    x = np.linspace(-25.0, 25.0, 1_000_003).astype(dtype)
    out, expected = ng.tanh(ng.tensor(x)).numpy(), np.tanh(x.astype(np.longdouble)).astype(dtype)
    assert ulps(np.abs(out), np.abs(expected)).max() <= 2
    assert (np.sign(out) == np.sign(expected)).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_exp_overflows_and_underflows_like_libm(dtype):
    big, small = (88.8, -104.0) if dtype == "float32" else (709.8, -745.2)
    x = np.array([big, small, math.inf, -math.inf, math.nan], dtype=dtype)
    out = ng.exp(ng.tensor(x)).numpy()
    assert out[0] == math.inf and out[1] == 0 and not np.signbit(out[1])
    assert out[2] == math.inf and out[3] == 0 and math.isnan(out[4])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("function", [ng.exp, ng.exp2, ng.sigmoid], ids=["exp", "exp2", "sigmoid"])
def test_results_that_round_to_zero_far_below_the_clamp_are_positive_zero(dtype, function):
    # (those lanes compute exp(0) and select 0, not the clamped argument's subnormal steps)
    out = function(ng.tensor(np.array([-1e4, -1e30, -math.inf, -2000.0, math.nan], dtype=dtype))).numpy()
    assert (out[:-1] == 0).all() and not np.signbit(out[:-1]).any() and math.isnan(out[-1])


_BOTH_EXPS = """
@njit(cache=CACHE, error_model='numpy')
def both(x, general, nonpositive):
    for i in range(x.shape[0]):
        general[i] = {general}(x[i])
        nonpositive[i] = {nonpositive}(x[i])
"""


@pytest.mark.parametrize("dtype", DTYPES)
def test_exp_of_a_nonpositive_argument_is_the_general_exp_bit_for_bit(dtype):
    # exp(-abs(x)) (sigmoid, logsigmoid) takes the cheaper version: the same bits over the whole range, subnormal
    # results included, and -inf, -0 and nan
    single = dtype == "float32"
    lo = -104.0 if single else -746.0
    x = np.concatenate([np.linspace(lo, 0.0, 1_000_003), [-math.inf, -0.0, math.nan, lo - 1]]).astype(dtype)
    names = ("_vexpf", "_vexpf_nonpositive") if single else ("_vexp", "_vexp_nonpositive")
    kernel = _BOTH_EXPS.format(general=names[0], nonpositive=names[1])
    module = codegen.load_module(
        f"test_exps_{dtype}",
        codegen.module_source("serial", vector_math.SOURCE, vector_math.SINGLE_SOURCE, kernel),
    )
    general, nonpositive = np.empty_like(x), np.empty_like(x)
    module.both(x, general, nonpositive)
    assert (general.view(np.uint8) == nonpositive.view(np.uint8)).all()
    assert (nonpositive[(x > lo + 20) & (x < -1)] > 0).all() and nonpositive[-4] == 0 and np.isnan(nonpositive[-2])
    results = nonpositive[:-4]
    assert ((0 < results) & (results < np.finfo(dtype).tiny)).any()  # subnormal results are kept


# log, log1p, expm1 and erf: float64 within a few ulp of a long-double (or libm, for erf) reference over their
# ranges, float32 within the float32 twins' ulps (those rows are float32_math) or correctly rounded nearly
# everywhere (the others: computed in float64, rounded once), and libm's special values
RANGES = {
    "log": np.concatenate([np.exp(np.linspace(-744.0, 709.0, 200_003)), np.linspace(0.5, 2.0, 100_003)]),
    "log1p": np.concatenate([np.linspace(-0.999, 3.0, 200_003), np.exp(np.linspace(-700.0, 700.0, 100_003))]),
    "expm1": np.concatenate([np.linspace(-3.0, 3.0, 200_003), np.linspace(-745.0, 709.0, 100_003)]),
    "erf": np.concatenate([np.linspace(-6.5, 6.5, 200_003), np.exp(np.linspace(-700.0, 0.0, 100_003))]),
    "log2": np.concatenate([np.exp(np.linspace(-744.0, 709.0, 200_003)), np.linspace(0.5, 2.0, 100_003)]),
    "log10": np.concatenate([np.exp(np.linspace(-744.0, 709.0, 200_003)), np.linspace(0.5, 2.0, 100_003)]),
    "sinh": np.concatenate([np.linspace(-710.4, 710.4, 200_003), np.linspace(-1.5, 1.5, 100_003)]),
    "cosh": np.concatenate([np.linspace(-710.4, 710.4, 200_003), np.linspace(-1.5, 1.5, 100_003)]),
    "atan": np.concatenate([np.linspace(-5.0, 5.0, 200_003), np.exp(np.linspace(-700.0, 700.0, 100_003))]),
    "asin": np.concatenate([np.linspace(-1.0, 1.0, 200_003), 1 - np.exp(np.linspace(-36.0, 0.0, 100_003))]),
    "acos": np.concatenate([np.linspace(-1.0, 1.0, 200_003), 1 - np.exp(np.linspace(-36.0, 0.0, 100_003))]),
    "sin": np.concatenate([np.linspace(-1e5, 1e5, 200_003), np.exp(np.linspace(-700.0, 700.0, 100_003))]),
    "cos": np.concatenate([np.linspace(-1e5, 1e5, 200_003), np.exp(np.linspace(-700.0, 700.0, 100_003))]),
    "tan": np.concatenate([np.linspace(-1e5, 1e5, 200_003), np.linspace(-1.6, 1.6, 100_003)]),
    "atanh": np.concatenate([np.linspace(-1.0, 1.0, 200_003), 1 - np.exp(np.linspace(-36.0, 0.0, 100_003))]),
    "exp2": np.concatenate([np.linspace(-1074.0, 1023.9, 200_003), np.linspace(-2.0, 2.0, 100_003)]),
    "asinh": np.concatenate([np.linspace(-5.0, 5.0, 200_003), np.exp(np.linspace(-700.0, 700.0, 100_003))]),
    "acosh": np.concatenate([np.linspace(1.0, 5.0, 200_003), 1 + np.exp(np.linspace(-700.0, 700.0, 100_003))]),
}
MAX_ULPS = {"log": 1, "log1p": 2, "expm1": 2, "erf": 4, "log2": 2, "log10": 2, "sinh": 3, "cosh": 3, "atan": 1,
            "asin": 1, "acos": 1, "sin": 2, "cos": 2, "tan": 3, "atanh": 3, "exp2": 2, "asinh": 3,
            "acosh": 3}  # fmt: skip
# (erf, sin and cos against libm's, themselves within an ulp)
FLOAT32_ULPS = {"log": 2, "log1p": 2, "expm1": 2, "erf": 2}  # the float32 twins' bounds (as compiled, below)


def reference(name: str, x: np.ndarray) -> np.ndarray:
    if name in ("erf", "sin", "cos", "tan"):  # (long double's sinl is less exact than libm's sin far from 0)
        return np.array([getattr(math, name)(v) if math.isfinite(v) else math.nan for v in x.astype(np.float64)])
    with np.errstate(divide="ignore", invalid="ignore"):  # (the ends of the domains: +-inf and nan, as ours)
        return getattr(np, name)(x.astype(np.longdouble))


@pytest.mark.parametrize("name", RANGES)
def test_vector_math_float64_within_its_ulps(name):
    x = RANGES[name]
    out = getattr(ng, name)(ng.tensor(x)).numpy()
    expected = reference(name, x).astype(np.float64)
    assert ulps(np.abs(out), np.abs(expected)).max() <= MAX_ULPS[name]
    assert (np.sign(out) == np.sign(expected)).all()


@pytest.mark.parametrize("name", RANGES)
def test_vector_math_float32_rounds_once(name):
    with np.errstate(over="ignore", divide="ignore"):  # (the float64 range, cast: keep what float32 holds)
        x = RANGES[name].astype(np.float32)
        x = x[(x != 0) & np.isfinite(reference(name, x).astype(np.float32))]
    out = getattr(ng, name)(ng.tensor(x)).numpy()
    expected = reference(name, x).astype(np.float32)
    if ROWS[name].float32_math:  # float32 arithmetic: Cephes' expf/logf polynomials and the erf forms
        assert ulps(np.abs(out), np.abs(expected)).max() <= FLOAT32_ULPS[name]
        assert (np.signbit(out) == np.signbit(expected)).all()
        return
    assert ulps(np.abs(out), np.abs(expected)).max() <= 1
    exact = ulps(np.abs(out), np.abs(expected)) == 0
    if name in ("sin", "cos", "tan"):  # beyond 1e5 the fix-up loop calls libm's float32 sinf/cosf (within an ulp)
        exact = exact[np.abs(x) <= 1e5]
    assert exact.mean() > 0.9999  # computed in float64, rounded once


SPECIAL = {  # (argument, libm's value) pairs (pairs, not a dict: 0.0 and -0.0 are one dict key)
    "log": [(0.0, -math.inf), (-0.0, -math.inf), (-1.0, math.nan), (math.inf, math.inf), (math.nan, math.nan),
            (5e-324, -744.4400719213812)],
    "log1p": [(-1.0, -math.inf), (-2.0, math.nan), (-0.0, -0.0), (0.0, 0.0), (1e-300, 1e-300), (math.inf, math.inf)],
    "expm1": [(710.0, math.inf), (-math.inf, -1.0), (-800.0, -1.0), (-0.0, -0.0), (1e-300, 1e-300),
              (math.nan, math.nan)],
    "erf": [(math.inf, 1.0), (-math.inf, -1.0), (-0.0, -0.0), (7.0, 1.0), (-30.0, -1.0), (math.nan, math.nan),
            (1e-300, 1.1283791670955126e-300)],
    "log2": [(0.0, -math.inf), (-1.0, math.nan), (math.inf, math.inf), (math.nan, math.nan), (5e-324, -1074.0),
             (1024.0, 10.0), (0.125, -3.0), (1.0, 0.0)],
    "log10": [(0.0, -math.inf), (-0.0, -math.inf), (-2.0, math.nan), (math.inf, math.inf), (1000.0, 3.0),
              (1e-300, -300.0), (1e300, 300.0), (1.0, 0.0)],
    "sinh": [(0.0, 0.0), (-0.0, -0.0), (math.inf, math.inf), (-math.inf, -math.inf), (math.nan, math.nan),
             (710.4, 1.6663642832806494e308), (-710.5, -math.inf), (1e-300, 1e-300)],
    "cosh": [(0.0, 1.0), (-0.0, 1.0), (-math.inf, math.inf), (math.nan, math.nan), (710.4, 1.6663642832806494e308),
             (711.0, math.inf)],
    "atan": [(0.0, 0.0), (-0.0, -0.0), (math.inf, math.pi / 2), (-math.inf, -math.pi / 2), (math.nan, math.nan),
             (1e-300, 1e-300), (1.0, math.pi / 4)],
    "asin": [(0.0, 0.0), (-0.0, -0.0), (1.0, math.pi / 2), (-1.0, -math.pi / 2), (1.5, math.nan), (math.nan, math.nan),
             (1e-300, 1e-300)],
    "acos": [(1.0, 0.0), (-1.0, math.pi), (0.0, math.pi / 2), (-1.5, math.nan), (math.nan, math.nan)],
    # beyond 1e5 and next to multiples of pi/2 the vectorized sin and cos give nan and the fix-up loop calls libm
    # (sin(inf) is nan there, of libm's sign: TRIG_HARD below)
    "sin": [(0.0, 0.0), (-0.0, -0.0), (math.nan, math.nan),
            (1e-300, 1e-300), (math.pi, math.sin(math.pi)), (1e22, math.sin(1e22)), (1e6, math.sin(1e6)),
            (-3 * math.pi / 2, math.sin(-3 * math.pi / 2)), (1e5, math.sin(1e5))],
    "cos": [(0.0, 1.0), (-0.0, 1.0), (math.nan, math.nan), (math.pi / 2, math.cos(math.pi / 2)),
            (1e22, math.cos(1e22)), (-1e6, math.cos(-1e6)), (21 * math.pi / 2, math.cos(21 * math.pi / 2))],
    "tan": [(0.0, 0.0), (-0.0, -0.0), (math.nan, math.nan), (math.pi / 2, math.tan(math.pi / 2)),
            (1e22, math.tan(1e22)),
            (math.pi, math.tan(math.pi)), (1e-300, 1e-300), (1e6, math.tan(1e6))],
    "atanh": [(0.0, 0.0), (-0.0, -0.0), (1.0, math.inf), (-1.0, -math.inf), (1.5, math.nan), (-2.0, math.nan),
              (math.nan, math.nan), (1e-300, 1e-300), (0.5, math.atanh(0.5))],
    "asinh": [(0.0, 0.0), (-0.0, -0.0), (math.inf, math.inf), (-math.inf, -math.inf), (math.nan, math.nan),
              (1e-300, 1e-300), (1e300, math.asinh(1e300)), (-2.5, math.asinh(-2.5))],
    "acosh": [(1.0, 0.0), (0.5, math.nan), (-2.0, math.nan), (math.inf, math.inf), (math.nan, math.nan),
              (1e300, math.acosh(1e300)), (2.5, math.acosh(2.5))],
    "exp2": [(0.0, 1.0), (-0.0, 1.0), (3.0, 8.0), (-1.0, 0.5), (1023.0, 2.0**1023), (1024.0, math.inf),
             (-1074.0, 5e-324), (-1076.0, 0.0), (math.inf, math.inf), (-math.inf, 0.0), (math.nan, math.nan)],
}  # fmt: skip


@pytest.mark.parametrize("name", SPECIAL)
def test_vector_math_special_values_are_libms(name):
    x, expected = np.array(SPECIAL[name]).T
    out = getattr(ng, name)(ng.tensor(np.repeat(x, 17))).numpy().reshape(-1, 17)  # vector body and remainder
    for column in out.T:
        np.testing.assert_allclose(column, expected, rtol=1e-15, equal_nan=True)
        assert (np.signbit(column) == np.signbit(expected)).all()


def test_atan2_within_an_ulp_and_c99s_values_on_every_pair_of_special_operands():
    rng = np.random.default_rng(1)
    special = np.array([0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 1e-300, -1e-300, 2.0, 1e300])
    sy, sx = (a.ravel() for a in np.meshgrid(special, special))
    spread = np.exp(rng.uniform(-300, 300, 50_000)) * rng.choice([-1.0, 1.0], 50_000)
    y = np.concatenate([rng.standard_normal(100_000) * 10, spread, sy])
    x = np.concatenate([rng.standard_normal(100_000) * 10, spread[::-1], sx])
    out = ng.atan2(ng.tensor(y), ng.tensor(x)).numpy()
    expected = np.arctan2(y.astype(np.longdouble), x.astype(np.longdouble)).astype(np.float64)
    numbers = ~np.isnan(expected)
    assert ulps(np.abs(out[numbers]), np.abs(expected[numbers])).max() <= 1
    assert (np.signbit(out[numbers]) == np.signbit(expected[numbers])).all() and np.isnan(out[~numbers]).all()


# --- sin and cos: vectorized where an ulp or two is certain, libm's for the rest (the kernels' fix-up loop) ---------
TRIG_HARD = np.array([1e6, -1e22, math.pi, math.pi / 2, 1e300, 2.5, -0.0, math.nan, math.inf, 1e5 + 1])


@pytest.mark.parametrize("name", ["sin", "cos", "tan", "sinc"])
def test_fast_trig_rows_give_libms_values_where_the_vectorized_trig_gives_up(name):
    x = np.tile(TRIG_HARD, 3)  # (the vector body and the remainder loop)
    with np.errstate(invalid="ignore"):  # (numpy's own sin(inf))
        expected = np.sinc(x) if name == "sinc" else getattr(np, name)(x)
    out = getattr(ng, name)(ng.tensor(x)).numpy()
    np.testing.assert_allclose(out, expected, rtol=4e-16, equal_nan=True)


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_fast_trig_gradients_call_libm_where_the_vectorized_trig_gives_up(name):
    x = ng.tensor(np.tile(TRIG_HARD, 3), requires_grad=True)
    getattr(ng, name)(x).sum().backward()
    with np.errstate(invalid="ignore"):
        expected = np.cos(x.detach().numpy()) if name == "sin" else -np.sin(x.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=4e-16, equal_nan=True)


def test_in_place_sin_keeps_libm_values_for_large_arguments():
    """An in-place kernel writes over its input, so it cannot compute a nan result again: it calls libm."""
    x = ng.tensor(np.tile(TRIG_HARD, 3))
    x.sin_()
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(x.numpy(), np.sin(np.tile(TRIG_HARD, 3)))


def test_parallel_fast_trig_kernel_fixes_up_too():
    kernel = codegen.row_kernel(ROWS["sin"], "forward", "a", "parallel")
    x = np.concatenate([np.linspace(-50.0, 50.0, 10_001), TRIG_HARD])
    out = np.empty_like(x)
    kernel(out, x)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(out, np.sin(x), rtol=4e-16, atol=1e-300, equal_nan=True)


def test_fast_trig_twins_call_the_vectorized_sin_and_cos_and_the_kernel_recomputes_nans():
    twin = vector_math.fix_up_twin(codegen._function_text(ROWS["sinc"].grads[0]))
    assert twin.startswith("def sinc_grad_fast(") and "_vcos(p)" in twin and "math.sin" not in twin
    kernel = codegen.row_kernel(ROWS["sin"], "forward", "a", "serial")
    source = inspect.getsource(sys.modules[kernel.py_func.__module__])
    assert "res[i] = sin_fast(x0[i])" in source and "if res[i] != res[i]:" in source and "res[i] = sin(x0[i])" in source


# --- fmod, remainder and floor_divide: one fma where the quotient is below 4e15, libm's fmod for the rest ------------
DIVISION_SPECIAL = [0.0, -0.0, 1.0, -1.0, 5.5, -5.5, 1e300, -1e300, 1e-300, 3e16, math.inf, -math.inf, math.nan, 7.0,
                    -7.0, 0.1, 3.0]  # fmt: skip


def division_operands(dtype):
    """Random operands of both signs (quotients up to 1e4) and every pair of DIVISION_SPECIAL, twice (the vector
    body and the remainder loop)."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(50_000) * 1e3, np.repeat(DIVISION_SPECIAL, len(DIVISION_SPECIAL))])
    y = np.concatenate([rng.uniform(0.1, 3.0, 50_000) * rng.choice([-1.0, 1.0], 50_000),
                        np.tile(DIVISION_SPECIAL, len(DIVISION_SPECIAL))])  # fmt: skip
    return np.tile(x, 2).astype(dtype), np.tile(y, 2).astype(dtype)


def torch_remainder(x, y):
    """torch's remainder: C's fmod, moved by the divisor where the signs differ (a zero keeps the dividend's sign)."""
    m = np.fmod(x, y)
    return np.where((m != 0) & ((y < 0) != (m < 0)), m + y, m)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("name", "reference"), [("fmod", np.fmod), ("remainder", torch_remainder), ("floor_divide", np.floor_divide)]
)
def test_division_rows_are_exact_where_fast_and_libms_elsewhere(name, reference, dtype):
    x, y = division_operands(dtype)
    with np.errstate(all="ignore"):
        expected = reference(x, y)
    out = getattr(ng, name)(ng.tensor(x), ng.tensor(y)).numpy()
    np.testing.assert_array_equal(out, expected)
    numbers = ~np.isnan(expected)
    np.testing.assert_array_equal(np.signbit(out[numbers]), np.signbit(expected[numbers]))


@pytest.mark.parametrize("name", ["fmod", "remainder", "floor_divide"])
def test_division_rows_match_torch_on_random_operands(torch, name):
    x, y = division_operands(np.float32)
    x, y = x[:50_000], y[:50_000]
    out = getattr(ng, name)(ng.tensor(x), ng.tensor(y)).numpy()
    theirs = getattr(torch, name)(torch.tensor(x), torch.tensor(y)).numpy()
    np.testing.assert_array_equal(out, theirs)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(theirs))


def test_integer_fmod_is_exact_for_the_most_negative_integer():
    x = np.array([7, -7, 7, -7, 0, 2**62 + 1, -(2**63)] * 3, dtype=np.int64)
    y = np.array([3, 3, -3, -3, 5, 7, 3] * 3, dtype=np.int64)
    np.testing.assert_array_equal(ng.fmod(ng.tensor(x), ng.tensor(y)).numpy(), np.fmod(x, y))
    np.testing.assert_array_equal(ng.remainder(ng.tensor(x), ng.tensor(y)).numpy(), np.remainder(x, y))


def test_in_place_and_parallel_division_kernels_keep_exact_values():
    x, y = division_operands(np.float64)
    t = ng.tensor(x.copy())
    t.fmod_(ng.tensor(y))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(t.numpy(), np.fmod(x, y))
        kernel = codegen.row_kernel(ROWS["remainder"], "forward", "aa", "parallel")
        out = np.empty_like(x)
        kernel(out, x, y)
        np.testing.assert_array_equal(out, torch_remainder(x, y))


def test_hypot_within_an_ulp_and_c99s_values_on_special_operands():
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.standard_normal(100_000) * 1e3, np.exp(rng.uniform(-700, 700, 100_000))])
    y = np.concatenate([rng.standard_normal(100_000), -np.exp(rng.uniform(-700, 700, 100_000))])
    out = ng.hypot(ng.tensor(x), ng.tensor(y)).numpy()
    assert ulps(out, np.hypot(x.astype(np.longdouble), y.astype(np.longdouble)).astype(np.float64)).max() <= 1
    pairs = [(math.inf, math.nan), (math.nan, -math.inf), (math.nan, 1.0), (0.0, -0.0), (1e308, 1e308),
             (1e-320, 1e-320), (3.0, 4.0), (-5.0, 12.0)]  # fmt: skip
    x, y = np.repeat(np.array(pairs).T, 17, axis=1)  # (the vector body and the remainder loop)
    np.testing.assert_array_equal(ng.hypot(ng.tensor(x), ng.tensor(y)).numpy(), np.hypot(x, y))


def test_cpu_row_kernels_use_the_vector_math_and_cuda_kernels_libm():
    fns = [ROWS["sigmoid"].forward]
    cpu = codegen.functions_source(fns, "serial", vector=True)
    assert vector_math.SOURCE.strip() in cpu
    assert "math.exp(" not in cpu.replace(vector_math.SOURCE.strip(), "")
    cuda = codegen.functions_source(fns, "cuda", vector=True)
    assert "math.exp(" in cuda and "_vexp" not in cuda


def test_functions_without_exp_or_tanh_do_not_carry_the_vector_math():
    assert "_vexp" not in codegen.functions_source([ROWS["relu"].forward], "serial", vector=True)


def test_a_loaded_kernel_module_keeps_only_the_vector_math_it_calls():
    """Each cached Numba function costs a file-system lookup when its module runs: the sin kernel's module defines
    the sine's functions and the fma it needs, not the exp, log or float32 families."""
    kernel = codegen.row_kernel(ROWS["sin"], "forward", "a", "serial")
    names = set(vars(sys.modules[kernel.py_func.__module__]))
    assert {"_vsin", "_vcos", "_vtrig_parts", "_fma", "sin_fast"} <= names
    assert not names & {"_vexp", "_vlog", "_vexpf", "_verf", "_vatan2", "_vfmod"}


@pytest.mark.parametrize("name, arity", [("erf", 1), ("asinh", 1), ("expm1", 1), ("acos", 1), ("atan2", 2)])
def test_float64_kernels_inline_the_vector_math_and_vectorize(name, arity):
    """``SOURCE``'s functions are ``forceinline``: LLVM left to itself kept these rows' functions as calls, and
    their loops ran 3-8x slower. The compiled kernel calls none of them and computes on vectors of doubles."""
    cached = codegen.row_kernel(ROWS[name], "forward", "a" * arity, "serial")
    # compiled here (a kernel loaded from the disk cache keeps no IR to read); its helpers may come from the cache
    options = {k: v for k, v in cached.targetoptions.items() if k != "nopython"}  # (njit sets it itself)
    kernel = numba.njit(**{**options, "cache": False})(cached.py_func)
    x = np.linspace(0.1, 0.9, 64)
    kernel(np.empty(64), *[x] * arity)
    ir = kernel.inspect_llvm(kernel.signatures[0])
    called = set(re.findall(r"call [^@\n]*@(\w+)", ir))
    mangled = [f"{len(f)}{f}" for f in re.findall(r"^def (_v\w+)", vector_math.SOURCE, re.MULTILINE)]
    assert not [c for c in called if any(m in c for m in mangled)]
    assert re.search(r"<\d+ x double>", ir)


def test_pruning_keeps_what_the_kept_functions_call_across_both_blocks():
    module = "def f(x):\n    return _verff(x)\n"
    text = vector_math.used_only(
        vector_math.SOURCE.strip("\n") + "\n\n" + vector_math.SINGLE_SOURCE.strip("\n") + module
    )
    for name in ("_verff", "_vexpf", "_vexpf_parts", "_hornerf", "_fmaf", "_pow2", "_ERF_TAYLOR", "_ERFC_P"):
        assert f"{name}" in text, name
    assert "def _vlog(" not in text and "def _vsin(" not in text
    assert vector_math.used_only(module) == module  # no vector math: nothing to prune


def test_the_vector_math_is_part_of_the_hashed_module_text(monkeypatch):
    """A change to the math changes the generated text, so Numba's cache cannot serve a stale kernel."""
    fns = [ROWS["exp"].forward]
    before = codegen.functions_source(fns, "serial", vector=True)
    monkeypatch.setattr(vector_math, "SOURCE", vector_math.SOURCE.replace("1.4426950408889634", "1.442695040888963"))
    assert codegen.functions_source(fns, "serial", vector=True) != before


# --- numbagrad.compile's float32 twins (all arithmetic in float32) ------------------------------------------
def compiled(fn):
    """``fn`` through numbagrad.compile, its plan traced on a first call so that later calls run fused kernels."""
    c = ng.compile(fn)

    def run(x):
        c(x)  # the trace (runs eagerly)
        return c(x)

    return run


def test_single_precision_twin_keeps_float32_arithmetic():
    text = "def f(x):\n    return 1.5 * x ** 2 + math.exp(-x) + 2\n"
    twin = vector_math.single_precision(text)
    assert twin.startswith("def f_f32(x):")
    assert "_f32(1.5) * x ** 2 + _vexpf(-x) + _f32(2)" in twin  # an exponent after ** stays an integer


def test_single_precision_twin_keeps_literals_that_float32_cannot_hold():
    """An epsilon that would round to 0, or a bound that would overflow, stays a float64 literal."""
    twin = vector_math.single_precision("def f(x):\n    return x / (x * x + 1e-300) + min(x, 1e300) + 0.25\n")
    assert "(x * x + 1e-300)" in twin and "min(x, 1e300)" in twin and "_f32(0.25)" in twin


def test_compiled_float32_rows_call_their_float32_twins():
    fns = [ROWS["sigmoid"].forward]
    source = codegen.functions_source(fns, "serial", inline="always", vector=True, single=fns)
    assert "def sigmoid_f32(x):" in source and "_vexpf(-x)" in source
    assert vector_math.SINGLE_SOURCE.strip() in source


@pytest.mark.parametrize(
    ("name", "lo", "hi", "max_ulps"),
    [("exp", -104.0, 89.0, 1), ("tanh", -25.0, 25.0, 2), ("erf", -6.0, 6.0, 2), ("expm1", -100.0, 88.7, 2),
     ("log", 1e-3, 1e4, 2), ("log1p", -0.999, 1e4, 2)],
)  # fmt: skip
def test_compiled_float32_functions_within_their_ulps(name, lo, hi, max_ulps):
    near_zero = np.linspace(-1.5, 1.5, 100_003) if name != "log" else np.exp(np.linspace(-103.0, 88.0, 100_003))
    x = np.concatenate([np.linspace(lo, hi, 200_003), near_zero]).astype(np.float32)
    x = x[x > lo] if name in ("log", "log1p") else x
    out = compiled(getattr(ng, name))(ng.tensor(x)).numpy()
    if name == "erf":
        expected = np.array([math.erf(v) for v in x.astype(np.float64)])
    else:
        expected = getattr(np, name)(x.astype(np.longdouble))
    with np.errstate(over="ignore"):  # (exp(89) is inf in float32, as ours)
        expected = expected.astype(np.float32)
    assert out.dtype == np.float32
    assert ulps(np.abs(out), np.abs(expected)).max() <= max_ulps
    assert (np.signbit(out) == np.signbit(expected)).all()


@pytest.mark.parametrize(
    ("name", "pairs"),
    [
        ("erf", [(math.inf, 1.0), (-math.inf, -1.0), (-0.0, -0.0), (4.0, 1.0), (1e-40, 1.1283791670955126e-40)]),
        ("expm1", [(89.0, math.inf), (-math.inf, -1.0), (-100.0, -1.0), (-0.0, -0.0), (1e-40, 1e-40)]),
        ("log", [(0.0, -math.inf), (-1.0, math.nan), (math.inf, math.inf), (1e-45, -103.27893), (1.0, 0.0)]),
        ("log1p", [(-1.0, -math.inf), (-2.0, math.nan), (-0.0, -0.0), (1e-40, 1e-40), (math.inf, math.inf)]),
    ],
)
def test_compiled_float32_special_values(name, pairs):
    x, expected = np.array(pairs + [(math.nan, math.nan)], dtype=np.float32).T
    out = compiled(getattr(ng, name))(ng.tensor(x)).numpy()
    np.testing.assert_allclose(out, expected, rtol=2e-7, atol=3e-45, equal_nan=True)  # (a subnormal: 1-2 units)
    assert (np.signbit(out[:-1]) == np.signbit(expected[:-1])).all()


# --- eager rows marked float32_math (the activations): float32 data runs the float32 twins -----------------------
FLOAT32_ROWS = [name for name, row in ROWS.items() if row.float32_math]
ACTIVATIONS = {"silu", "gelu", "gelu_tanh", "mish", "softplus", "hardswish", "hardsigmoid", "logsigmoid", "elu"}


def test_the_activations_and_the_log_tanh_erf_family_are_the_rows_with_float32_math():
    assert set(FLOAT32_ROWS) == {"sigmoid", "silu", "gelu", "gelu_tanh", "mish", "softplus", "hardswish",
                                 "hardsigmoid", "logsigmoid", "elu", "log", "tanh", "log1p", "expm1",
                                 "erf"}  # fmt: skip


def test_float32_math_rows_dispatch_on_the_dtype_in_one_kernel_source():
    sigmoid = codegen.row_kernel(ROWS["sigmoid"], "forward", "a", "serial")
    assert "sigmoid_f32" in sigmoid.py_func.__globals__  # the twin is in the kernel's module
    x = np.linspace(-5, 5, 101)
    out32, out64 = np.empty(101, np.float32), np.empty(101)
    sigmoid(out32, x.astype(np.float32))
    sigmoid(out64, x)
    assert len(sigmoid.signatures) == 2
    np.testing.assert_allclose(out64, 1 / (1 + np.exp(-x)), rtol=4e-16)  # float64 data: the float64 function
    np.testing.assert_allclose(out32, out64, rtol=3 * 2**-23)


@pytest.mark.parametrize("name", FLOAT32_ROWS)
def test_float32_math_rows_match_torch_over_a_dense_range(torch, name):
    """Forward and gradient of every float32-math activation against torch's float32 kernels at 40002 points
    (absolute 4e-6: both compute in float32, where gelu's 1 + erf(x / sqrt(2)) or 1 + tanh(...) cancels for negative
    x: at x = -5.157 the tanh form's gradient is -5.5e-7, torch gives 0 and we give -1.1e-6)."""
    call = {
        "gelu_tanh": lambda lib, t: lib.nn.functional.gelu(t, approximate="tanh"),
        "elu": lambda lib, t: lib.nn.functional.elu(t, alpha=1.3),
        "softplus": lambda lib, t: lib.nn.functional.softplus(t, beta=1.5, threshold=15.0),
    }.get(name, lambda lib, t: getattr(lib.nn.functional if name in ACTIVATIONS else lib, name)(t))
    x = np.concatenate([np.linspace(-30, 30, 20_001), np.linspace(-3, 3, 20_001)]).astype(np.float32)
    results = []
    for lib in (ng, torch):
        t = lib.tensor(x, requires_grad=True)
        out = call(lib, t)
        out.sum().backward()
        results.append((out.detach().numpy(), t.grad.numpy()))
    for ours, theirs in zip(*results):
        assert ours.dtype == np.float32
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=4e-6)


def test_compiled_float32_exp_overflows_and_underflows_like_libm():
    x = np.array([88.8, -104.0, -100.0, math.inf, -math.inf, math.nan, -0.0], dtype=np.float32)
    out = compiled(ng.exp)(ng.tensor(x)).numpy()
    assert out[0] == math.inf and out[1] == 0 and out[2] == np.float32(np.exp(-100.0))  # a subnormal
    assert out[3] == math.inf and out[4] == 0 and math.isnan(out[5]) and out[6] == 1


@pytest.mark.parametrize("value", EXTREMES)
@pytest.mark.parametrize(("name", "ours", "theirs"), FUNCTIONS, ids=IDS)
def test_compiled_float32_matches_torch_at_extremes(torch, name, ours, theirs, value):
    theirs = torch_function(torch, name, theirs)
    x = ng.tensor(np.full(17, value, dtype=np.float32), requires_grad=True)
    out = compiled(ours)(x)
    x.grad = None
    out.sum().backward()
    tx = torch.tensor(value, dtype=torch.float32, requires_grad=True)
    expected = theirs(tx)
    expected.backward()
    assert_like_torch(out.detach().numpy(), expected.item(), "float32", zero_sign=False)
    assert_like_torch(x.grad.numpy(), tx.grad.item(), "float32", zero_sign=False)
