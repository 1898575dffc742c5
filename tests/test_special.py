"""numbagrad.special against torch.special: values over sweeps of each function's domain (large, small, negative,
near poles, inf and nan), dtypes, gradients (gradcheck and torch's), and the names and graphs torch has.

Values are compared in units in the last place of torch's float64 result (``_ulps``); the oscillating Bessel and
Airy functions relative to 1 near their zeros, where both sums cancel. float32 results are the float64 ones
rounded once (the kernels compute float32 data in float64), so they are compared with those exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import numbagrad
from numbagrad import scalar_math, special
from numbagrad.autograd import gradcheck, gradgradcheck

# x: every scale, both signs, the branch points of the expansions (2.09, 5, 8, 26, 50), overflow, inf and nan
_POINTS = [0.0, 5e-324, 1e-300, 1e-30, 1e-8, 1e-5, 0.1, 0.5, 0.99, 1.0, 2.0, 2.09, 5.0, 8.0, 8.5, 26.0, 26.7, 50.0]
_POINTS += [51.0, 103.9, 700.0, 710.0, 5e7, 1e10, 1e300, math.inf]
SWEEP = np.array(
    sorted(set(_POINTS + [-p for p in _POINTS] + list(np.linspace(-30, 30, 241)) + list(np.geomspace(1e-6, 1e4, 90))))
    + [-v for v in np.geomspace(1e-6, 1e4, 90)]
    + [math.nan]
)
PROBABILITIES = np.concatenate(
    [np.linspace(0, 1, 201), np.geomspace(1e-300, 0.5, 60), 1 - np.geomspace(1e-16, 0.5, 40)]
)
PROBABILITIES = np.concatenate([PROBABILITIES, [-0.1, 1.1, math.nan]])

#: (function, points, ulps allowed, scale). The kernels evaluate torch's expansions in torch's order, with libm's
#: exp, log and sqrt, and fuse the multiply-adds that torch's compiled CPU kernels fuse (AVX2 and AVX-512 builds
#: contract ``a * b + c``): the Bessel and Airy functions and ndtri agree with torch bit for bit (a torch whose
#: CPU capability is DEFAULT, without FMA, differs by up to 7 ulp). entr keeps the vectorizable log (2 ulp, 2.7x
#: faster than libm's). ndtr, ``(1 + erf(x)) / 2`` in both, cancels
#: below 0: compared relative to 1, as the oscillating Bessel and Airy functions near their zeros. log_ndtr below -1
#: goes through erfcx, whose torch differs from the exact value by up to 8 ulp (the next tests).
UNARY = [
    ("i0", SWEEP, 2, 0.0),
    ("i0e", SWEEP, 2, 0.0),
    ("i1", SWEEP, 2, 0.0),
    ("i1e", SWEEP, 2, 0.0),
    ("modified_bessel_i0", SWEEP, 2, 0.0),
    ("modified_bessel_i1", SWEEP, 2, 0.0),
    ("modified_bessel_k0", SWEEP, 2, 0.0),
    ("modified_bessel_k1", SWEEP, 2, 0.0),
    ("scaled_modified_bessel_k0", SWEEP, 2, 0.0),
    ("scaled_modified_bessel_k1", SWEEP, 2, 0.0),
    ("bessel_j0", SWEEP, 2, 1.0),
    ("bessel_j1", SWEEP, 2, 1.0),
    ("bessel_y0", SWEEP, 2, 1.0),
    ("bessel_y1", SWEEP, 2, 1.0),
    ("airy_ai", SWEEP, 2, 1.0),
    ("spherical_bessel_j0", SWEEP, 2, 0.0),
    ("log_ndtr", SWEEP, 2, 0.0),
    ("entr", SWEEP, 2, 0.0),
    ("ndtr", SWEEP, 2, 1.0),
    ("ndtri", PROBABILITIES, 2, 0.0),
]


@pytest.fixture
def fused_torch(torch):
    """torch, when its CPU kernels are the fused ones numbagrad's match (AVX2, AVX-512 and the other builds whose
    compiler contracts ``a * b + c``); a torch running its DEFAULT kernels rounds every product (up to 11 ulp
    apart)."""
    if torch.backends.cpu.get_cpu_capability() == "DEFAULT":
        pytest.skip("torch runs its unfused DEFAULT CPU kernels")
    return torch


def _ulps(ours: np.ndarray, theirs: np.ndarray, scale: float = 0.0) -> np.ndarray:
    """|ours - theirs| in units of the last place of ``max(|theirs|, scale)``; 0 where both are the same
    value (infinities, NaN), inf where only one is NaN or infinite."""
    same = (ours == theirs) | (np.isnan(ours) & np.isnan(theirs))
    with np.errstate(invalid="ignore"):
        unit = np.spacing(np.maximum(np.maximum(np.abs(theirs), scale), np.finfo(np.float64).tiny))
        d = np.abs(ours - theirs) / unit
    return np.where(same, 0.0, np.where(np.isnan(d), np.inf, d))


def _assert_ulps(ours: np.ndarray, theirs: np.ndarray, points: np.ndarray, ulps: float, scale: float = 0.0) -> None:
    d = _ulps(ours, theirs, scale).reshape(-1)
    k = int(np.argmax(d))
    assert d[k] <= ulps, f"at {points.reshape(-1)[k]!r}: {ours.reshape(-1)[k]!r}, torch {theirs.reshape(-1)[k]!r}"


@pytest.mark.parametrize(("name", "points", "ulps", "scale"), UNARY, ids=[u[0] for u in UNARY])
def test_float64_values_match_torch_over_the_domain(fused_torch, name, points, ulps, scale):
    ours = getattr(special, name)(numbagrad.tensor(points)).numpy()
    theirs = getattr(fused_torch.special, name)(fused_torch.tensor(points)).numpy()
    _assert_ulps(ours, theirs, points, ulps, scale)


@pytest.mark.parametrize("name", [u[0] for u in UNARY if u[0] != "ndtr"] + ["erfcx"])
def test_float32_values_are_the_float64_values_rounded_once(name):
    points = SWEEP if name == "erfcx" else UNARY[[u[0] for u in UNARY].index(name)][1]
    single = getattr(special, name)(numbagrad.tensor(points, dtype=numbagrad.float32))
    double = getattr(special, name)(numbagrad.tensor(points.astype(np.float32).astype(np.float64)))
    assert single.dtype is numbagrad.float32
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(single.numpy(), double.numpy().astype(np.float32))


@pytest.mark.parametrize("name", ["i0", "i1e", "erfcx", "log_ndtr", "bessel_j0", "modified_bessel_k1", "ndtri"])
def test_float32_values_are_close_to_torchs(torch, name):
    points = np.linspace(0.05, 0.95, 19) if name == "ndtri" else np.linspace(-4, 4, 33) + 0.01
    ours = getattr(special, name)(numbagrad.tensor(points, dtype=numbagrad.float32)).numpy()
    theirs = getattr(torch.special, name)(torch.tensor(points, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=2e-6, atol=1e-6)


def test_erfcx_is_within_3_ulp_of_the_exact_value_over_the_domain():
    """``exp(x * x) erfc(x)`` with ``x * x`` carried exactly (one fused multiply-add): libm's erfc, off by up to 2
    ulp itself (at 0.8156), is the rest."""
    mpmath = pytest.importorskip("mpmath")
    points = SWEEP[(SWEEP >= -26.6) & (np.abs(SWEEP) < 1e12)]
    points = np.concatenate([points, np.linspace(0.01, 3.0, 300), [0.8156090789610246]])
    ours = special.erfcx(numbagrad.tensor(points)).numpy()
    with mpmath.workdps(40):
        exact = np.array([float(mpmath.exp(mpmath.mpf(x) ** 2) * mpmath.erfc(mpmath.mpf(x))) for x in points])
    _assert_ulps(ours, exact, points, 3)


def test_erfcx_is_within_torchs_own_error_of_torchs(torch):
    """torch's erfcx (Chebyshev pieces in 4 / (4 + x)) is up to 8 ulp from the exact value between 0 and 0.5;
    numbagrad's within 3 (the test above): the two differ by up to 9 ulp there."""
    points = SWEEP[SWEEP >= -1]
    ours = special.erfcx(numbagrad.tensor(points)).numpy()
    _assert_ulps(ours, torch.special.erfcx(torch.tensor(points)).numpy(), points, 9)


def test_erfcx_of_large_negative_inputs_is_exact_where_torchs_rounds_x_squared():
    """torch computes ``2 exp(x * x)`` from ``x * x`` rounded (400 ulp off near -23); numbagrad's is exact."""
    mpmath = pytest.importorskip("mpmath")
    points = np.array([-1.5, -3.3, -6.2, -12.7, -23.1, -26.6])
    ours = special.erfcx(numbagrad.tensor(points)).numpy()
    with mpmath.workdps(50):
        exact = np.array([float(mpmath.exp(mpmath.mpf(x) ** 2) * mpmath.erfc(mpmath.mpf(x))) for x in points])
    _assert_ulps(ours, exact, points, 2)
    assert special.erfcx(numbagrad.tensor([-26.8, -math.inf])).tolist() == [math.inf, math.inf]


POLYNOMIALS = [
    "chebyshev_polynomial_t",
    "chebyshev_polynomial_u",
    "chebyshev_polynomial_v",
    "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w",
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
]
# x inside and outside [-1, 1] (and [0, 1]), at +-1 and 0; degrees negative, small, above the closed-form
# thresholds (4, 6, 8), fractional (truncated), past Hermite's limit of 512, nan and inf
POLY_X = np.array([-2.5, -1.0, -0.7, -0.2, 0.0, 0.3, 0.5, 0.9, 1.0, 1.7])
POLY_X = np.concatenate([POLY_X, np.random.default_rng(2).uniform(-3.0, 3.0, 30)])
POLY_N = np.array([-3.0, -0.5, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 9.0, 12.0, 2.7, 30.0, 600.0, math.nan, math.inf])
POLY_N = np.concatenate([POLY_N, [25.0, 32.0, 100.0, 511.0, 513.0]])


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomials_match_torch_over_degrees_and_arguments(fused_torch, name):
    torch = fused_torch
    x, n = np.meshgrid(POLY_X, POLY_N)
    ours = getattr(special, name)(numbagrad.tensor(x), numbagrad.tensor(n)).numpy()
    theirs = getattr(torch.special, name)(torch.tensor(x), torch.tensor(n)).numpy()
    # the same recurrences, fused as torch's compiled ones, and libm's cos and acos: the same values
    _assert_ulps(ours, theirs, x, 2)


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomials_of_nan_are_nan_from_degree_one(name):
    ours = getattr(special, name)(numbagrad.tensor([math.nan] * 4), numbagrad.tensor([-1.0, 0.0, 1.0, 5.0]))
    assert ours.tolist()[:2] == [0.0, 1.0] and all(math.isnan(v) for v in ours.tolist()[2:])


@pytest.mark.parametrize("name", POLYNOMIALS[:3] + POLYNOMIALS[8:])
def test_polynomials_take_a_number_for_either_operand(torch, name):
    x = np.array([-0.4, 0.3, 1.2])
    ours = getattr(special, name)(numbagrad.tensor(x), 3)
    theirs = getattr(torch.special, name)(torch.tensor(x), 3)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-15)
    n = numbagrad.tensor([0, 2, 5])
    np.testing.assert_allclose(  # (float32: torch's computed in float32)
        getattr(special, name)(0.3, n).numpy(),
        getattr(torch.special, name)(0.3, torch.tensor([0, 2, 5])).numpy(),
        rtol=2e-6,
    )


# incomplete gamma: a and x across the series, continued-fraction and a ~ x regimes, 0, inf, nan, negative
GAMMA_POINTS = np.array([-1.0, 0.0, 1e-3, 0.1, 0.5, 0.9, 1.0, 1.1, 2.0, 5.0, 19.0, 25.0, 30.0, 100.0, 150.0, 250.0])
GAMMA_POINTS = np.concatenate([GAMMA_POINTS, [1000.0, 1e4, math.inf, math.nan]])


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_incomplete_gamma_matches_torch(fused_torch, name):
    torch = fused_torch
    a, x = np.meshgrid(GAMMA_POINTS, GAMMA_POINTS)
    ours = getattr(special, name)(numbagrad.tensor(a), numbagrad.tensor(x)).numpy()
    theirs = getattr(torch.special, name)(torch.tensor(a), torch.tensor(x)).numpy()
    # torch sums an asymptotic series for a ~ x beyond 20 (within 2e-9: it takes float's pi) where numbagrad
    # keeps to the power series and the continued fraction (within 1e-14 of the true value: the next test)
    np.testing.assert_allclose(ours, theirs, rtol=2e-9, atol=1e-300)
    with np.errstate(invalid="ignore", divide="ignore"):
        near = np.abs(x - a) / a
    apart = ~(((a > 20) & (a < 200) & (near < 0.3)) | ((a > 200) & (near < 4.5 / np.sqrt(a))))
    if name == "gammaincc":  # elsewhere the same series and fraction, fused as torch's compiled ones
        _assert_ulps(ours[apart], theirs[apart], a[apart], 2)
    else:  # (P = 1 - Q cancels: at a = 1.1, x = 1.229 numbagrad's is 18 ulp from the exact value, torch's 29)
        np.testing.assert_allclose(ours[apart], theirs[apart], rtol=1e-13, atol=1e-300)


def test_incomplete_gamma_of_large_nearby_arguments_is_accurate():
    mpmath = pytest.importorskip("mpmath")
    a = np.array([30.0, 150.0, 1000.0, 1e4])
    x = np.array([28.0, 160.0, 1010.0, 9950.0])
    ours = special.gammainc(numbagrad.tensor(a), numbagrad.tensor(x)).numpy()
    with mpmath.workdps(50):
        exact = np.array([float(mpmath.gammainc(p, 0, q, regularized=True)) for p, q in zip(a, x)])
    np.testing.assert_allclose(ours, exact, rtol=1e-13)


def test_zeta_and_xlog1py_match_torch(torch):
    x, q = np.meshgrid([-2.0, 0.5, 1.0, 1.5, 2.0, 3.0, 7.5, 40.0, math.inf, math.nan], [-2.0, -1.5, 0.0, 0.3, 1.0, 4.0])
    ours = special.zeta(numbagrad.tensor(x), numbagrad.tensor(q)).numpy()
    _assert_ulps(ours, torch.special.zeta(torch.tensor(x), torch.tensor(q)).numpy(), x, 2)
    y = q - 0.5
    ours = special.xlog1py(numbagrad.tensor(x), numbagrad.tensor(y)).numpy()
    _assert_ulps(ours, torch.special.xlog1py(torch.tensor(x), torch.tensor(y)).numpy(), x, 1)
    zeros = special.xlog1py(numbagrad.tensor([0.0, 0.0]), numbagrad.tensor([-1.0, math.nan]))
    assert zeros[0].item() == 0.0 and math.isnan(zeros[1].item())


@pytest.mark.parametrize(
    ("name", "args"),
    [("airy_ai", ([1, 2],)), ("entr", ([0, 1, -1],)), ("i0", ([1, 2],)), ("zeta", ([2, 3], [1, 2]))]
    + [("chebyshev_polynomial_t", ([1, 2, 3], [1, 2, 3])), ("xlog1py", ([1, 2], [True, False]))],
)
def test_integer_and_bool_inputs_promote_to_the_default_float(torch, name, args):
    ours = getattr(special, name)(*[numbagrad.tensor(a) for a in args])
    theirs = getattr(torch.special, name)(*[torch.tensor(a) for a in args])
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1] == "float32"
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)  # (torch's computed in float32)


def test_incomplete_gamma_refuses_integer_tensors_and_numbers_as_torch(torch):
    with pytest.raises(NotImplementedError, match="^\"igamma_cpu\" not implemented for 'Long'$"):
        special.gammainc(numbagrad.tensor([1, 2]), numbagrad.tensor([1, 2]))
    with pytest.raises(TypeError, match=r"^special_gammainc\(\): argument 'other' \(position 2\) must be Tensor"):
        special.gammainc(numbagrad.tensor([1.0]), 2.0)
    ours = special.gammaincc(numbagrad.tensor([0.5, 1.5]), numbagrad.tensor([1, 2]))
    theirs = torch.special.gammaincc(torch.tensor([0.5, 1.5]), torch.tensor([1, 2]))
    assert ours.dtype is numbagrad.float32
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)  # (torch's computed in float32)


# --- gradients ----------------------------------------------------------------------------------------------
DIFFERENTIABLE = [
    ("i0", (-3.0, 3.0)),
    ("i0e", (-3.0, 3.0)),
    ("i1", (-3.0, 3.0)),
    ("i1e", (-3.0, 3.0)),
    ("erfcx", (-2.0, 3.0)),
    ("log_ndtr", (-6.0, 3.0)),
    ("ndtri", (0.05, 0.95)),
    ("ndtr", (-3.0, 3.0)),
    ("entr", (0.2, 3.0)),
]


@pytest.mark.parametrize(("name", "domain"), DIFFERENTIABLE, ids=[d[0] for d in DIFFERENTIABLE])
def test_gradients_pass_gradcheck_and_gradgradcheck(name, domain):
    x = numbagrad.tensor(np.random.default_rng(0).uniform(*domain, 5), requires_grad=True)
    assert gradcheck(getattr(special, name), (x,))
    assert gradgradcheck(getattr(special, name), (x,))


@pytest.mark.parametrize(("name", "domain"), DIFFERENTIABLE, ids=[d[0] for d in DIFFERENTIABLE])
def test_gradients_and_nodes_match_torch(torch, name, domain):
    values = np.random.default_rng(1).uniform(*domain, 6)
    x = numbagrad.tensor(values, requires_grad=True)
    tx = torch.tensor(values, requires_grad=True)
    y, ty = getattr(special, name)(x), getattr(torch.special, name)(tx)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-13)
    if name != "ndtr":  # (a composition in both: its last node is a product)
        assert type(y.grad_fn).__name__ == type(ty.grad_fn).__name__


def test_i1_and_i1e_have_torchs_gradient_one_half_at_zero(torch):
    for name in ("i1", "i1e"):
        x = numbagrad.tensor([0.0], requires_grad=True)
        getattr(special, name)(x).backward(numbagrad.ones(1))
        assert x.grad.item() == 0.5


@pytest.mark.parametrize(("name", "message"), [("zeta", "zeta"), ("gammainc", "igamma: input")])
def test_binary_gradients_exist_for_the_second_input_only(torch, name, message):
    first = numbagrad.tensor([1.5, 2.5], dtype=numbagrad.float64, requires_grad=True)
    second = numbagrad.tensor([0.7, 1.9], dtype=numbagrad.float64, requires_grad=True)
    with pytest.raises(NotImplementedError, match=f"^the derivative for '{message}' is not implemented.$"):
        getattr(special, name)(first, second).sum().backward()
    fixed = first.detach()
    assert gradcheck(lambda s: getattr(special, name)(fixed, s), (second,))
    ts = torch.tensor([0.7, 1.9], dtype=torch.float64, requires_grad=True)
    getattr(torch.special, name)(torch.tensor([1.5, 2.5], dtype=torch.float64), ts).sum().backward()
    getattr(special, name)(fixed, second).sum().backward()
    np.testing.assert_allclose(second.grad.numpy(), ts.grad.numpy(), rtol=1e-12)


def test_xlog1py_gradients_match_torch_for_tensors_and_numbers(torch):
    a, b = np.array([0.0, 0.5, -2.0]), np.array([-1.0, 0.3, 4.0])
    x, y = numbagrad.tensor(a, requires_grad=True), numbagrad.tensor(b, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    special.xlog1py(x, y).sum().backward()
    torch.special.xlog1py(tx, ty).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy())
    assert type(special.xlog1py(2.0, y).grad_fn).__name__ == "SpecialXlog1PyBackward1"
    assert type(special.xlog1py(x, 2.0).grad_fn).__name__ == "SpecialXlog1PyBackward2"
    assert gradcheck(
        special.xlog1py, (numbagrad.tensor([0.4, 1.3], dtype=numbagrad.float64, requires_grad=True), y[1:])
    )


@pytest.mark.parametrize("name", ["bessel_j0", "modified_bessel_k1", "airy_ai", "spherical_bessel_j0"])
def test_functions_torch_has_no_derivative_for_record_no_graph(torch, name):
    x = numbagrad.tensor([0.5, 1.5], requires_grad=True)
    y = getattr(special, name)(x)
    assert y.grad_fn is None and not y.requires_grad
    assert not getattr(torch.special, name)(torch.tensor([0.5, 1.5], requires_grad=True)).requires_grad


def test_polynomials_record_no_graph():
    x = numbagrad.tensor([0.5, 1.5], requires_grad=True)
    y = special.legendre_polynomial_p(x, numbagrad.tensor([2.0, 3.0], requires_grad=True))
    assert y.grad_fn is None and not y.requires_grad


# --- names, aliases, the compositions and the top-level forms -----------------------------------------------
def test_the_module_has_torch_specials_names(torch):
    assert sorted(special.__all__) == sorted(torch.special.__all__)
    assert all(callable(getattr(special, name)) for name in special.__all__)


@pytest.mark.parametrize(
    ("alias", "op"),
    [("expit", "sigmoid"), ("gammaln", "lgamma"), ("psi", "digamma"), ("digamma", "digamma"), ("erf", "erf")]
    + [("erfc", "erfc"), ("erfinv", "erfinv"), ("exp2", "exp2"), ("expm1", "expm1"), ("log1p", "log1p")]
    + [("sinc", "sinc"), ("i0", "i0")],
)
def test_aliases_compute_the_ops_they_name(torch, alias, op):
    values = np.linspace(-0.9, 2.5, 7) if op not in ("lgamma", "digamma") else np.linspace(0.3, 4, 7)
    ours = getattr(special, alias)(numbagrad.tensor(values))
    np.testing.assert_array_equal(ours.numpy(), getattr(numbagrad, op)(numbagrad.tensor(values)).numpy())
    np.testing.assert_allclose(ours.numpy(), getattr(torch.special, alias)(torch.tensor(values)).numpy(), rtol=1e-14)
    with pytest.raises(TypeError, match=rf"^special_{alias}\(\): argument 'input' \(position 1\) must be Tensor"):
        getattr(special, alias)(1.0)


def test_multigammaln_is_mvlgamma_with_torchs_values_and_gradient(torch):
    values = np.array([[2.5, 3.25], [1.75, 6.0]])
    for p in (1, 2, 3):
        x = numbagrad.tensor(values, requires_grad=True)
        tx = torch.tensor(values, requires_grad=True)
        y, ty = special.multigammaln(x, p), torch.special.multigammaln(tx, p)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-14)
        y.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-13)
    t = numbagrad.tensor([2.5, 4.0], dtype=numbagrad.float64, requires_grad=True)
    assert gradcheck(lambda v: numbagrad.mvlgamma(v, 3), (t,))
    with pytest.raises(RuntimeError, match="^p has to be greater than or equal to 1$"):
        numbagrad.mvlgamma(numbagrad.tensor([2.5]), 0)


def test_top_level_forms_and_tensor_methods_match_torch(torch):
    a, b = np.array([0.5, 2.0, 3.5]), np.array([1.0, 1.5, 6.0])
    x, y, tx, ty = numbagrad.tensor(a), numbagrad.tensor(b), torch.tensor(a), torch.tensor(b)
    np.testing.assert_allclose(numbagrad.igamma(x, y).numpy(), torch.igamma(tx, ty).numpy(), rtol=1e-15)
    np.testing.assert_allclose(x.igammac(y).numpy(), tx.igammac(ty).numpy(), rtol=1e-15)
    np.testing.assert_allclose(x.i0().numpy(), tx.i0().numpy(), rtol=1e-15)
    np.testing.assert_allclose(y.mvlgamma(2).numpy(), ty.mvlgamma(2).numpy(), rtol=1e-15)
    np.testing.assert_allclose(x.polygamma(2).numpy(), tx.polygamma(2).numpy(), rtol=1e-14)
    for method, args in (("i0_", ()), ("igamma_", (y,)), ("igammac_", (y,)), ("mvlgamma_", (2,)), ("polygamma_", (2,))):
        ours, theirs = y.clone(), ty.clone()
        targs = tuple(ty if a is y else a for a in args)
        assert getattr(ours, method)(*args) is ours
        getattr(theirs, method)(*targs)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-14)


def test_softmax_log_softmax_logsumexp_and_round(torch):
    values = np.array([[1.0, -2.0, 0.5], [3.0, 3.0, -1.0]])
    x, tx = numbagrad.tensor(values, dtype=numbagrad.float32), torch.tensor(values, dtype=torch.float32)
    np.testing.assert_allclose(special.softmax(x, 1).numpy(), torch.special.softmax(tx, 1).numpy(), rtol=1e-6)
    ours = special.log_softmax(x, 0, dtype=numbagrad.float64)
    assert ours.dtype is numbagrad.float64
    np.testing.assert_allclose(ours.numpy(), torch.special.log_softmax(tx, 0, dtype=torch.float64).numpy())
    np.testing.assert_allclose(special.logsumexp(x, 1, keepdim=True).numpy(), torch.special.logsumexp(tx, 1, True))
    r = np.array([1.2345, -2.5, 2.5, 1e-3])
    assert (
        special.round(numbagrad.tensor(r), decimals=2).tolist()
        == torch.special.round(torch.tensor(r), decimals=2).tolist()
    )
    assert special.round(numbagrad.tensor(r)).tolist() == torch.special.round(torch.tensor(r)).tolist()


# --- the fused multiply-add the kernels share with torch's compiled ones ------------------------------------
def test_the_tables_fma_rounds_once():
    a = 1.0 + 2.0**-30
    assert scalar_math.fma(a, a, -(a * a)) == 2.0**-60  # the product's rounding error, lost unfused
    assert scalar_math.fma(1e308, 10.0, -1e308) == math.inf
    assert math.copysign(1.0, scalar_math.fma(-0.0, 1.0, -0.0)) == -1.0
    assert math.isnan(scalar_math.fma(math.inf, 0.0, 1.0))


@pytest.mark.parametrize("name", ["i0e", "modified_bessel_k1", "bessel_y1", "airy_ai", "spherical_bessel_j0", "ndtri"])
def test_kernels_fuse_the_multiply_adds_the_table_functions_do(name):
    """The generated kernels' ``fma`` is the processor's (one rounding): their values are the table functions'
    evaluated in Python with exact fused steps, bit for bit."""
    row = scalar_math.ROWS[f"special_{name}"]
    points = np.linspace(0.013, 0.987, 41) if name == "ndtri" else np.linspace(-11.3, 12.1, 97)
    ours = getattr(special, name)(numbagrad.tensor(points)).numpy()
    with np.errstate(all="ignore"):
        python = np.array([_python_value(row.forward, float(p)) for p in points])
    np.testing.assert_array_equal(ours, python)


def _python_value(fn, x: float) -> float:
    try:
        return fn(x)
    except ValueError:  # (math.log of a negative number: the kernels' NaN)
        return math.nan
