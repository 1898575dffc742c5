"""Elementwise ops, beyond what the table generates: each form's node name, dtype promotion, integer
behaviour, edge values and errors, compared with torch 2.13."""

from __future__ import annotations

import math

import numpy as np
import pytest

import numbagrad
from torch_same import same

pytestmark = pytest.mark.torch


X = np.array([[-1.5, -0.5, 0.0, 0.3], [0.7, 1.0, 2.5, -2.0]])
Y = np.array([[0.4, -0.5, 1.0, 0.3], [2.0, -1.5, 0.5, 1.0]])


# --- node names of each form ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda lib, x, y: lib.fmod(x, y), id="fmod-tensor"),
        pytest.param(lambda lib, x, y: lib.fmod(x, 0.7), id="fmod-number"),
        pytest.param(lambda lib, x, y: lib.clamp_min(x, y), id="clamp_min-tensor"),
        pytest.param(lambda lib, x, y: lib.clamp_min(x, 0.3), id="clamp_min-number"),
        pytest.param(lambda lib, x, y: lib.clamp_max(x, y), id="clamp_max-tensor"),
        pytest.param(lambda lib, x, y: lib.clamp_max(x, 0.3), id="clamp_max-number"),
        pytest.param(lambda lib, x, y: lib.clamp(x, min=y), id="clamp-tensor-min"),
        pytest.param(lambda lib, x, y: lib.clamp(x, max=y), id="clamp-tensor-max"),
        pytest.param(lambda lib, x, y: lib.clamp(x, y - 1, y), id="clamp-tensor-both"),
        pytest.param(lambda lib, x, y: lib.clamp(x, y, y - 1), id="clamp-min-above-max"),
        pytest.param(lambda lib, x, y: lib.clamp(x, x, y), id="clamp-ties"),
        pytest.param(lambda lib, x, y: lib.clamp(x, -0.5, 0.5), id="clamp-numbers"),
        pytest.param(lambda lib, x, y: lib.clip(x, max=0.0), id="clip"),
        pytest.param(lambda lib, x, y: lib.lerp(x, y, 0.3), id="lerp-small-weight"),
        pytest.param(lambda lib, x, y: lib.lerp(x, y, 0.8), id="lerp-large-weight"),
        pytest.param(lambda lib, x, y: lib.lerp(x, y, y), id="lerp-tensor-weight"),
        pytest.param(lambda lib, x, y: lib.atan2(x, y), id="atan2"),
        pytest.param(lambda lib, x, y: lib.square(x), id="square"),
        pytest.param(lambda lib, x, y: lib.round(x), id="round"),
        pytest.param(lambda lib, x, y: lib.round(x * 3.7, decimals=1), id="round-decimals"),
        pytest.param(lambda lib, x, y: lib.addcmul(x, x, y, value=0.5), id="addcmul"),
        pytest.param(lambda lib, x, y: lib.addcdiv(x, x, y, value=-2), id="addcdiv"),
        pytest.param(lambda lib, x, y: lib.hypot(x, y), id="hypot"),
        pytest.param(lambda lib, x, y: lib.reciprocal(y), id="reciprocal"),
        pytest.param(lambda lib, x, y: lib.floor(x), id="floor"),
        pytest.param(lambda lib, x, y: lib.ceil(x), id="ceil"),
        pytest.param(lambda lib, x, y: lib.trunc(x), id="trunc"),
        pytest.param(lambda lib, x, y: lib.frac(x * 3.7), id="frac"),
        pytest.param(lambda lib, x, y: (x * 3.7).frac(), id="frac-method"),
    ],
)
def test_each_form_matches_torch_in_values_node_and_gradients(torch, fn):
    same(torch, fn, X.copy(), Y.copy())


@pytest.mark.parametrize(
    "name", ["sinh", "cosh", "atan", "expm1", "erf", "erfinv", "log1p", "log2", "log10", "asin", "acos"]
)
def test_unary_rows_match_torch(torch, name):
    x = np.array([0.01, 0.3, 0.6, 0.9])
    same(torch, lambda lib, t: getattr(lib, name)(t), x)
    same(torch, lambda lib, t: getattr(t, name)(), x)


def test_erfinv_matches_torch_at_the_ends_of_its_domain(torch):
    """Infinite at -1 and 1, NaN beyond, -0.0 kept, and the tails (torch's values are within 2e-15 there)."""
    x = np.array([-1.0, 1.0, 1.5, -2.0, np.nan, -0.0, 0.0, 1e-300, -0.999, 0.99999, -0.9999999])
    same(torch, lambda lib, t: lib.erfinv(t), x, grads=False, rtol=2e-15)


def test_erfinv_of_float32_matches_torch(torch):
    x = np.linspace(-0.999, 0.999, 41).astype(np.float32)
    same(torch, lambda lib, t: lib.erfinv(t), x, rtol=3e-7)


def test_erfinv_undoes_erf():
    x = numbagrad.linspace(-4, 4, 81, dtype=numbagrad.float64)
    np.testing.assert_allclose(numbagrad.erfinv(numbagrad.erf(x)).numpy(), x.numpy(), rtol=1e-9, atol=1e-15)


def test_erfinv_near_one_is_as_exact_as_in_the_middle():
    """Beyond |y| = 0.99998 the CPU kernel's fast erfc gives way to libm's (the fix-up loop): the tail keeps its
    digits, in an array that mixes both."""
    from numbagrad.scalar_math import _np_erfinv

    tail = 1 - np.logspace(-15, -1, 57)
    y = np.concatenate([tail, -tail, np.linspace(-0.9, 0.9, 19)])
    np.testing.assert_allclose(numbagrad.erfinv(numbagrad.tensor(y)).numpy(), _np_erfinv(y), rtol=1e-14)


def test_erfinv_in_place_is_the_tensor_method():
    x = numbagrad.tensor([0.25, -0.75])
    expected = x.erfinv()
    assert x.erfinv_() is x
    np.testing.assert_array_equal(x.numpy(), expected.numpy())


# --- integers and bools ---------------------------------------------------------------------------------------------
I = np.array([[5, -5, 7], [-7, 0, 3]])


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda lib, i: lib.square(i), id="square-int-stays-int"),
        pytest.param(lambda lib, i: lib.square(i > 0), id="square-bool-is-int64"),
        pytest.param(lambda lib, i: lib.square(i.to(lib.uint8)), id="square-uint8"),
        pytest.param(lambda lib, i: lib.fmod(i, 3), id="fmod-int"),
        pytest.param(lambda lib, i: lib.fmod(i, -2), id="fmod-int-negative-divisor"),
        pytest.param(lambda lib, i: lib.fmod(i, 2.5), id="fmod-int-by-float"),
        pytest.param(lambda lib, i: lib.atan2(i, i + 10), id="atan2-int-is-float"),
        pytest.param(lambda lib, i: lib.erf(i), id="erf-int-is-float"),
        pytest.param(lambda lib, i: lib.log1p(i + 10), id="log1p-int-is-float"),
        pytest.param(lambda lib, i: lib.clamp_min(i, 0), id="clamp_min-int"),
        pytest.param(lambda lib, i: lib.clamp_min(i, 0.5), id="clamp_min-int-by-float"),
        pytest.param(lambda lib, i: lib.clamp(i, min=i - 1), id="clamp-int-tensor-bound"),
        pytest.param(lambda lib, i: lib.clip(i, 0, 2), id="clip-int"),
        pytest.param(lambda lib, i: lib.round(i), id="round-int"),
        pytest.param(lambda lib, i: lib.floor(i), id="floor-int"),
        pytest.param(lambda lib, i: lib.trunc(i), id="trunc-int"),
        pytest.param(lambda lib, i: lib.reciprocal(i + 10), id="reciprocal-int-is-float"),
        pytest.param(lambda lib, i: lib.nan_to_num(i), id="nan_to_num-int-is-a-copy"),
        pytest.param(lambda lib, i: lib.logical_and(i, i - 5), id="logical_and-int"),
        pytest.param(lambda lib, i: lib.logical_or(i.float(), i > 3), id="logical_or-mixed"),
        pytest.param(lambda lib, i: lib.addcmul(i, i, i, value=2), id="addcmul-int"),
    ],
)
def test_integer_and_bool_inputs_match_torch(torch, fn):
    # (float32 results within an ulp: ours are rounded once from float64, torch's atan2f of 7, 17 is an ulp off)
    same(torch, fn, I.copy(), rtol=1.2e-7)


def test_integer_fmod_by_zero_raises_like_torch():
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        numbagrad.fmod(numbagrad.tensor([1, 2]), 0)


def test_integer_round_with_decimals_is_not_implemented_like_torch():
    with pytest.raises(NotImplementedError, match="\"round_cpu\" not implemented for 'Long'"):
        numbagrad.round(numbagrad.tensor([1, 2]), decimals=1)


def test_frac_of_integers_and_bitwise_ops_of_floats_are_not_implemented_like_torch():
    with pytest.raises(NotImplementedError, match="\"frac_cpu\" not implemented for 'Long'"):
        numbagrad.frac(numbagrad.tensor([1, 2]))
    with pytest.raises(NotImplementedError, match="\"bitwise_and_cpu\" not implemented for 'Float'"):
        numbagrad.bitwise_and(numbagrad.tensor([1.0]), numbagrad.tensor([1.0]))


def test_floor_ceil_trunc_round_and_frac_of_edge_values_match_torch_bit_for_bit(torch):
    """Halves (round's ties go to even), -0.3 (a -0. result), huge values, inf and nan, in float32 and float64."""
    edge = [0.5, 1.5, 2.5, -0.5, -2.5, -0.3, 0.3, 4503599627370497.0, 1e30, -1e30, np.inf, -np.inf, np.nan, -0.0]
    for dtype in (np.float32, np.float64):
        x = np.array(edge, dtype)
        for name in ("floor", "ceil", "trunc", "round", "frac"):
            got = getattr(numbagrad, name)(numbagrad.tensor(x)).numpy()
            want = getattr(torch, name)(torch.tensor(x)).numpy()
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("exponent", [2, 3, 1, 0, 2.0, -1.5, 0.5, -0.5, -1, -2, -1.0, -2.0])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pow_by_a_number_matches_torch_bit_for_bit_on_edge_values_with_its_gradient(torch, exponent, dtype):
    """2, 3, 1 and 0 take torch's own shortcuts (x * x, x * x * x, x, 1), 0.5 and -0.5 give its sqrt's and
    rsqrt's values (-0 and -inf differ from pow's), -1 and -2 its 1 / x and 1 / (x * x) (float32 1e20 ** -2 is 0,
    where pow gives 1e-40): nan and inf included, and the gradient reads x ** (exponent - 1) the same way."""
    x = np.array([0.0, -0.0, 1.5, -2.5, np.inf, -np.inf, np.nan, 3.0, 1e20], dtype)
    a, b = numbagrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yb = a**exponent, b**exponent
    got, want = ya.detach().numpy(), yb.detach().numpy()
    np.testing.assert_array_equal(got, want)
    numbers = ~np.isnan(want)  # (a nan's sign bit is not part of the contract: torch's sqrt and rsqrt differ)
    np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))
    ya.backward(numbagrad.ones_like(ya))
    yb.backward(torch.ones_like(yb))
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)


def test_float32_powers_are_libms_pow_rounded_to_float32_for_random_and_special_operands():
    """A float32 ``x ** y`` is libm's (float32 ``powf`` for two float32 operands): within an ulp of ``pow`` in
    float64 rounded once, with C99's rules for signs, zeros, infinities, nan and 1 (odd and even integer exponents
    of negative bases, fractions of them) exactly."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(0, 30, 20000), -rng.uniform(0, 30, 2000)]).astype(np.float32)
    odd_and_even = rng.choice([-7.0, -6.0, -5.0, -4.0, -2.0, -1.0, 4.0, 5.0, 6.0, 7.0], 2000)  # (not power's shortcuts)
    y = np.concatenate([rng.uniform(-6, 6, 20000), odd_and_even]).astype(np.float32)
    special = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 1e-40, np.inf, -np.inf, np.nan, 1e30], np.float32)
    exponents = np.array([-3.0, -1.0, 1.5, 4.0, 5.0, -2.5, np.inf, -np.inf, np.nan, 1e10, 7.0], np.float32)
    x = np.concatenate([x, np.repeat(special, exponents.size)])
    y = np.concatenate([y, np.tile(exponents, special.size)])
    got = (numbagrad.tensor(x) ** numbagrad.tensor(y)).numpy()
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)
    finite = np.isfinite(want)
    np.testing.assert_array_max_ulp(got[finite], want[finite], maxulp=1)
    np.testing.assert_array_equal(got[~finite], want[~finite])  # (nan, inf and -inf where pow gives them)
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(want)]), np.signbit(want[~np.isnan(want)]))


def test_integer_tensors_to_the_power_of_a_half_and_minus_a_half_are_float_roots_like_torch(torch):
    i = np.array([4, 9, 2, 0, 3, 1000003], np.int64)
    for exponent in (0.5, -0.5):
        got, want = numbagrad.tensor(i) ** exponent, torch.tensor(i) ** exponent
        assert str(got.dtype) == "numbagrad.float32"
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-7)  # (torch's float32 sqrt is 0.5001 ulp)


def test_compiled_roots_give_the_eager_values_at_minus_zero_and_minus_inf():
    x = numbagrad.tensor([-0.0, 0.0, -np.inf, np.inf, -1.0, 2.0, np.nan])

    @numbagrad.compile
    def roots(t):
        return t**0.5 + 1, t**-0.5 * 2

    for got, want in zip(roots(x), (x**0.5 + 1, x**-0.5 * 2)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert roots(x)[1][0].item() == -np.inf


def test_integer_pow_by_small_exponents_stays_exact_beyond_float64s_integers(torch):
    i = np.array([3037000499, -2097151, 7, 0], np.int64)
    for exponent in (2, 3, 1, 0):
        np.testing.assert_array_equal((numbagrad.tensor(i) ** exponent).numpy(), (torch.tensor(i) ** exponent).numpy())


def test_addcdiv_of_integers_is_refused_like_torch():
    i = numbagrad.tensor([1, 2])
    with pytest.raises(RuntimeError, match="Integer division with addcdiv is no longer supported"):
        numbagrad.addcdiv(i, i, i)


# --- edge values ----------------------------------------------------------------------------------------------------
def test_fmod_takes_the_dividends_sign_and_keeps_negative_zero(torch):
    x = np.array([-0.0, 0.0, -4.0, 5.5, -5.5, np.inf, np.nan, 3.0, 1e-300])
    y = np.array([2.0, 2.0, 2.0, -2.0, 2.0, 2.0, 1.0, np.inf, 3.0])
    ours = numbagrad.fmod(numbagrad.tensor(x), numbagrad.tensor(y)).numpy()
    theirs = torch.fmod(torch.tensor(x), torch.tensor(y)).numpy()
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(np.signbit(ours), np.signbit(theirs))


def test_fmod_by_float_zero_is_nan():
    assert math.isnan(numbagrad.fmod(numbagrad.tensor([1.5]), 0.0).item())


def test_log1p_and_expm1_are_precise_near_zero(torch):
    x = np.array([1e-18, -1e-12, 3e-9, 1e-5])
    for name in ("log1p", "expm1"):
        ours = getattr(numbagrad, name)(numbagrad.tensor(x)).numpy()
        # within 2 ulp of torch (torch's own vectorized float64 log1p is 1 ulp from libm's in 1 element of 10)
        np.testing.assert_allclose(ours, getattr(torch, name)(torch.tensor(x)).numpy(), rtol=4.5e-16, atol=0)
        np.testing.assert_allclose(ours, x, rtol=1e-4)  # log1p(x) ~ expm1(x) ~ x: no cancellation


@pytest.mark.parametrize(("name", "x"), [("log1p", [-1.0, -2.0]), ("log2", [0.0, -1.0]), ("log10", [0.0, -1.0]),
                                         ("asin", [2.0, -1.5]), ("acos", [1.5, -3.0])])  # fmt: skip
def test_out_of_domain_values_are_inf_or_nan_like_torch(torch, name, x):
    ours = getattr(numbagrad, name)(numbagrad.tensor(x)).numpy()
    np.testing.assert_array_equal(ours, getattr(torch, name)(torch.tensor(x)).numpy())


def test_atan2_covers_the_four_quadrants_and_signed_zeros(torch):
    y = np.array([1.0, 1.0, -1.0, -1.0, 0.0, -0.0, 0.0, -0.0])
    x = np.array([1.0, -1.0, -1.0, 1.0, -1.0, -1.0, 0.0, 0.0])
    ours = numbagrad.atan2(numbagrad.tensor(y), numbagrad.tensor(x)).numpy()
    np.testing.assert_array_equal(ours, torch.atan2(torch.tensor(y), torch.tensor(x)).numpy())


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_nan_to_num_replaces_with_the_dtypes_limits_by_default(torch, dtype):
    x = [math.nan, math.inf, -math.inf, 1.5]
    ours = numbagrad.nan_to_num(numbagrad.tensor(x, dtype=getattr(numbagrad, dtype)))
    theirs = torch.nan_to_num(torch.tensor(x, dtype=getattr(torch, dtype)))
    assert ours.dtype.name == dtype
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_nan_to_num_takes_given_replacements_and_passes_gradient_only_where_finite(torch):
    x = np.array([math.nan, math.inf, -math.inf, 1.5])
    same(torch, lambda lib, t: lib.nan_to_num(t, nan=1.0, posinf=2.0, neginf=-3.0), x)
    same(torch, lambda lib, t: t.nan_to_num(posinf=7.0), x)


def test_clamp_propagates_nan_from_the_input_and_tensor_bounds(torch):
    x = np.array([1.5, math.nan, 0.5])
    lo = np.array([0.0, 0.0, math.nan])
    ours = numbagrad.clamp(numbagrad.tensor(x), min=numbagrad.tensor(lo)).numpy()
    np.testing.assert_array_equal(ours, torch.clamp(torch.tensor(x), min=torch.tensor(lo)).numpy())
    ours = numbagrad.clamp_min(numbagrad.tensor(x), math.nan).numpy()
    np.testing.assert_array_equal(ours, torch.clamp_min(torch.tensor(x), math.nan).numpy())


@pytest.mark.parametrize("decimals", [-2, -1, 1, 2, 3])
def test_round_with_decimals_matches_torch_ties_to_even(torch, decimals):
    x = np.array([1.2345, -2.5, 2.5, 1234.5, 1250.0, 1350.0, -1250.0, 0.125, 0.375, 1e300])
    ours = numbagrad.round(numbagrad.tensor(x), decimals=decimals).numpy()
    np.testing.assert_array_equal(ours, torch.round(torch.tensor(x), decimals=decimals).numpy())


def test_lerp_is_exact_at_both_ends(torch):
    x, y = np.array([1e16, -3.0, 0.1]), np.array([1.0, 7.0, 0.7])
    for w in (0.0, 1.0):
        ours = numbagrad.lerp(numbagrad.tensor(x), numbagrad.tensor(y), w).numpy()
        np.testing.assert_array_equal(ours, torch.lerp(torch.tensor(x), torch.tensor(y), w).numpy())
        np.testing.assert_array_equal(ours, x if w == 0 else y)


# --- errors ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda lib, f: lib.atan2(f, 2.0), id="atan2-number"),
        pytest.param(lambda lib, f: lib.fmod(2.0, f), id="fmod-number-first"),
        pytest.param(lambda lib, f: lib.fmod(f, "a"), id="fmod-string"),
        pytest.param(lambda lib, f: lib.clamp_min(2.0, f), id="clamp_min-number-first"),
        pytest.param(lambda lib, f: lib.clamp_max(f, None), id="clamp_max-none"),
        pytest.param(lambda lib, f: lib.lerp(f, 2.0, 0.5), id="lerp-number-end"),
        pytest.param(lambda lib, f: lib.lerp(f, f, "a"), id="lerp-string-weight"),
        pytest.param(lambda lib, f: lib.lerp(f, f.double(), 0.5), id="lerp-end-dtype"),
        pytest.param(lambda lib, f: lib.lerp(f, f, f.double()), id="lerp-weight-dtype"),
        pytest.param(lambda lib, f: lib.lerp(f.long(), f.long(), 0.5), id="lerp-integer"),
        pytest.param(lambda lib, f: lib.nan_to_num(2.0), id="nan_to_num-number"),
        pytest.param(lambda lib, f: lib.square(2.0), id="square-number"),
        pytest.param(lambda lib, f: lib.clamp(f), id="clamp-no-bounds"),
        pytest.param(lambda lib, f: lib.clamp(f, f, 0.5), id="clamp-tensor-and-number-bounds"),
        pytest.param(lambda lib, f: lib.clamp(f, 0.5, f), id="clamp-number-and-tensor-bounds"),
    ],
)
def test_errors_match_torch_type_and_message(torch, fn):
    errors = []
    for lib in (numbagrad, torch):
        with pytest.raises(Exception) as info:
            fn(lib, lib.tensor([1.5, -2.0]))
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


def test_lerp_accepts_a_0d_weight_of_another_dtype_like_torch(torch):
    f = np.array([1.0, 2.0], dtype=np.float32)
    ours = numbagrad.lerp(numbagrad.tensor(f), numbagrad.tensor(f * 3), numbagrad.tensor(0.25, dtype=numbagrad.float64))
    theirs = torch.lerp(torch.tensor(f), torch.tensor(f * 3), torch.tensor(0.25, dtype=torch.float64))
    assert ours.dtype is numbagrad.float32
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


# --- in-place forms -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "op",
    [
        pytest.param(lambda t, y: t.fmod_(0.7), id="fmod_"),
        pytest.param(lambda t, y: t.lerp_(y, 0.25), id="lerp_"),
        pytest.param(lambda t, y: t.lerp_(y, y), id="lerp_-tensor"),
        pytest.param(lambda t, y: t.clamp_min_(0.1), id="clamp_min_"),
        pytest.param(lambda t, y: t.clamp_max_(y), id="clamp_max_"),
        pytest.param(lambda t, y: t.square_(), id="square_"),
        pytest.param(lambda t, y: t.atan2_(y), id="atan2_"),
        pytest.param(lambda t, y: t.round_(decimals=1), id="round_-decimals"),
        pytest.param(lambda t, y: t.nan_to_num_(), id="nan_to_num_"),
        pytest.param(lambda t, y: t.addcmul_(y, y, value=3), id="addcmul_"),
        pytest.param(lambda t, y: t.addcdiv_(y, y + 3, value=3), id="addcdiv_"),
        pytest.param(lambda t, y: t.erf_(), id="erf_"),
        pytest.param(lambda t, y: t.log1p_(), id="log1p_"),
        pytest.param(lambda t, y: t.abs_(), id="abs_"),
        pytest.param(lambda t, y: t.neg_(), id="neg_"),
        pytest.param(lambda t, y: t.exp_(), id="exp_"),
        pytest.param(lambda t, y: t.log_(), id="log_"),
        pytest.param(lambda t, y: t.sqrt_(), id="sqrt_"),
        pytest.param(lambda t, y: t.sigmoid_(), id="sigmoid_"),
        pytest.param(lambda t, y: t.tanh_(), id="tanh_"),
        pytest.param(lambda t, y: t.relu_(), id="relu_"),
        pytest.param(lambda t, y: t.pow_(2), id="pow_-number"),
        pytest.param(lambda t, y: t.pow_(y), id="pow_-tensor"),
    ],
)
def test_inplace_forms_match_torch(torch, op):
    def run(lib, x, y):
        t = x * 1
        assert op(t, y) is t
        return t

    same(torch, run, np.abs(X) + 0.1, Y.copy())
