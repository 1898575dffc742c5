"""The later elementwise rows (asinh ... heaviside): node names of every operand form, edge values
(zeros, infinities, nan, domain ends) and gradients, against torch 2.13 with ``torch_same.same``."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from torch_same import same

pytestmark = pytest.mark.torch


X = np.array([[-1.5, -0.5, 0.0, 0.3], [0.7, 1.0, 2.5, -2.0]])
Y = np.array([[0.4, -0.5, 1.0, 0.3], [2.0, -1.5, 0.5, 1.0]])
EDGES = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-300, 30.0, -30.0, 800.0, np.inf, -np.inf, np.nan])


@pytest.mark.parametrize("name", ["asinh", "arcsinh", "atanh", "arctanh", "erfc", "exp2", "deg2rad", "rad2deg",
                                  "sinc"])  # fmt: skip
def test_unary_rows_match_torch_with_gradients(torch, name):
    same(torch, lambda lib, x: getattr(lib, name)(x * 0.35), X)  # (inside atanh's domain)
    same(torch, lambda lib, x: getattr(x * 0.35, name)(), X)


def test_acosh_matches_torch_above_one_with_its_gradient(torch):
    same(torch, lambda lib, x: lib.acosh(x.abs() + 1.2), X)


def test_sgn_of_reals_is_sign_with_its_own_node_and_a_zero_gradient(torch):
    same(torch, lambda lib, x: lib.sgn(x), X, grads=False)  # (torch's gradient is a ZeroTensor numpy refuses)
    x = numbagrad.tensor(X, requires_grad=True)
    x.sgn().sum().backward()
    assert x.grad.tolist() == np.zeros_like(X).tolist()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", ["asinh", "acosh", "atanh", "erfc", "exp2", "deg2rad", "rad2deg", "sinc", "sgn",
                                  "signbit", "isneginf", "isposinf"])  # fmt: skip
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unary_rows_match_torch_on_edge_values(torch, name, dtype):
    x = EDGES.astype(dtype)
    got = getattr(numbagrad, name)(numbagrad.tensor(x)).numpy()
    want = getattr(torch, name)(torch.tensor(x)).numpy()
    assert got.dtype == want.dtype
    # (sinc near whole numbers: torch multiplies by a float32 pi and gives about 1e-8 where the value is 0)
    atol = 3e-8 if name == "sinc" and dtype == "float32" else 0
    np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == "float32" else 1e-13, atol=atol)
    if atol == 0:
        np.testing.assert_array_equal(np.signbit(got[~np.isnan(want)]), np.signbit(want[~np.isnan(want)]))


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda lib, x, y: lib.xlogy(x, y.abs()), id="xlogy-tensor"),
        pytest.param(lambda lib, x, y: lib.xlogy(x, 2.5), id="xlogy-number"),
        pytest.param(lambda lib, x, y: lib.xlogy(2.5, y.abs() + 0.1), id="xlogy-number-first"),
        pytest.param(lambda lib, x, y: x.xlogy(y.abs()), id="xlogy-method"),
        pytest.param(lambda lib, x, y: lib.logaddexp(x, y), id="logaddexp"),
        pytest.param(lambda lib, x, y: lib.logaddexp2(x, y), id="logaddexp2"),
        pytest.param(lambda lib, x, y: lib.copysign(x, y), id="copysign-tensor"),
        pytest.param(lambda lib, x, y: lib.copysign(x, -1.0), id="copysign-number"),
        pytest.param(lambda lib, x, y: lib.fmax(x, y), id="fmax"),
        pytest.param(lambda lib, x, y: lib.fmin(x, y), id="fmin"),
        pytest.param(lambda lib, x, y: x.fmax(y * 2), id="fmax-method"),
    ],
)
def test_binary_rows_match_torch_with_node_names_and_gradients(torch, fn):
    same(torch, fn, X, Y)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", ["xlogy", "logaddexp", "logaddexp2", "copysign", "fmax", "fmin", "heaviside"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_rows_match_torch_on_every_pair_of_edge_values(torch, name, dtype):
    x, y = (a.ravel().astype(dtype) for a in np.meshgrid(EDGES, EDGES))
    got = getattr(numbagrad, name)(numbagrad.tensor(x), numbagrad.tensor(y)).numpy()
    want = getattr(torch, name)(torch.tensor(x), torch.tensor(y)).numpy()
    # (logaddexp2(-1, -1) is 0; torch's log1p(1) / ln 2 leaves -1e-8 in float32, -5e-17 in float64)
    atol = (2e-8 if dtype == "float32" else 1e-16) if name == "logaddexp2" else 0
    np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == "float32" else 1e-13, atol=atol)
    if atol == 0:
        np.testing.assert_array_equal(np.signbit(got[~np.isnan(want)]), np.signbit(want[~np.isnan(want)]))


def test_fmax_and_fmin_of_integers_stay_integers_like_torch(torch):
    a, b = np.array([3, -7, 0]), np.array([-2, 5, 0])
    for name in ("fmax", "fmin"):
        got = getattr(numbagrad, name)(numbagrad.tensor(a), numbagrad.tensor(b))
        want = getattr(torch, name)(torch.tensor(a), torch.tensor(b))
        assert got.dtype == numbagrad.int64
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_heaviside_records_a_node_without_a_derivative_like_torch(torch):
    x = numbagrad.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    y = numbagrad.heaviside(x, numbagrad.tensor([0.5]))
    assert type(y.grad_fn).__name__ == type(torch.heaviside(torch.tensor([1.0], requires_grad=True),
                                                           torch.tensor([0.5])).grad_fn).__name__  # fmt: skip
    assert y.tolist() == [0.0, 0.5, 1.0]
    with pytest.raises(RuntimeError, match="^derivative for aten::heaviside is not implemented$"):
        y.sum().backward()


@pytest.mark.parametrize(
    ("call", "node"),
    [
        (lambda lib, x: lib.remainder(x, x), "RemainderBackward1"),
        (lambda lib, x: x % x, "RemainderBackward1"),
        (lambda lib, x: lib.remainder(x, 2.0), "RemainderBackward0"),
        (lambda lib, x: x % 2, "RemainderBackward0"),
        (lambda lib, x: lib.remainder(3.0, x), "NotImplemented"),
        (lambda lib, x: 3.0 % x, "NotImplemented"),
    ],
)
def test_remainder_records_torchs_node_for_each_kind_of_operands(torch, call, node):
    values = [1.5, -2.0, 0.7]
    ours = call(numbagrad, numbagrad.tensor(values, requires_grad=True))
    theirs = call(torch, torch.tensor(values, requires_grad=True))
    assert type(ours.grad_fn).__name__ == type(theirs.grad_fn).__name__ == node
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-6)


def test_remainder_of_a_number_by_a_tensor_refuses_backward_as_torch():
    x = numbagrad.tensor([1.5, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="^derivative for aten::remainder is not implemented$"):
        (3.0 % x).sum().backward()


def test_integer_inputs_of_float_rows_give_the_default_float_like_torch(torch):
    i = np.array([1, 2, 3])
    for name in ("asinh", "exp2", "deg2rad", "sinc", "erfc"):
        got = getattr(numbagrad, name)(numbagrad.tensor(i))
        want = getattr(torch, name)(torch.tensor(i))
        assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=3e-8)  # (sinc: see above)


def test_in_place_forms_write_into_the_tensor(torch):
    x = numbagrad.tensor([0.25, 0.5])
    x.asinh_().exp2_()
    want = torch.tensor([0.25, 0.5]).asinh_().exp2_()
    np.testing.assert_allclose(x.numpy(), want.numpy(), rtol=1e-7)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("eps", [None, 0.05])
def test_logit_matches_torch_inside_and_outside_its_range_with_and_without_eps(torch, eps):
    x = np.array([0.0, 0.02, 0.3, 0.99, 1.0, 1.5, -0.1, np.nan])
    kwargs = {} if eps is None else {"eps": eps}
    same(torch, lambda lib, t: lib.logit(t * 0.5 + 0.25, **kwargs), X)
    a, b = numbagrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yb = numbagrad.logit(a, **kwargs), torch.logit(b, **kwargs)
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-13)
    ya.sum().backward()
    yb.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-13)
    assert type(ya.grad_fn).__name__ == "LogitBackward0"


@pytest.mark.parametrize("divisor", [2.0, -2.0])
def test_remainder_zero_results_keep_the_dividends_sign_as_torch(torch, divisor):
    """torch's remainder is its fmod, moved by the divisor when the signs differ: a zero keeps the dividend's sign
    (Python's % gives the divisor's)."""
    values = [-4.0, 4.0, -0.0, 0.0, 5.5, -5.5]
    ours = numbagrad.remainder(numbagrad.tensor(values), divisor).numpy()
    theirs = torch.remainder(torch.tensor(values, dtype=torch.float64), divisor).numpy()
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(np.signbit(ours), np.signbit(theirs))
