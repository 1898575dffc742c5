"""GELU on float32 data: the CPU kernels' float32 form (``vector_math.GELU_F32``: the normal tail from Abramowitz &
Stegun's erfc form) against the exact GELU, against torch, and through gradcheck and double backward."""

import math

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.autograd import gradcheck

F = ng.nn.functional
DENSE = np.concatenate([np.linspace(-8, 8, 40_001), np.linspace(-1e-3, 1e-3, 2_001)]).astype(np.float32)


def exact_gelu(x: np.ndarray) -> np.ndarray:
    return np.array([v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in x.astype(np.float64)])


def exact_gelu_grad(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    cdf = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in x])
    return cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def test_float32_gelu_is_within_5e_7_of_the_exact_value():
    out = F.gelu(ng.tensor(DENSE)).numpy()
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, exact_gelu(DENSE), rtol=0, atol=5e-7)


def test_float32_gelu_keeps_the_negative_tail_without_cancellation():
    """``1 + erf(x / sqrt(2))`` cancels for negative ``x``; the tail form keeps 3 digits where gelu is 1e-3 small."""
    x = DENSE[(DENSE < -1) & (np.abs(exact_gelu(DENSE)) > 1e-3)]
    out = F.gelu(ng.tensor(x)).numpy().astype(np.float64)
    expected = exact_gelu(x)
    assert (np.abs(out - expected) / np.abs(expected)).max() < 3e-4


def test_float32_gelu_gradient_is_within_5e_7_of_the_exact_value():
    x = ng.tensor(DENSE, requires_grad=True)
    F.gelu(x).sum().backward()
    assert x.grad.dtype == ng.float32
    np.testing.assert_allclose(x.grad.numpy(), exact_gelu_grad(DENSE), rtol=0, atol=5e-7)


def test_float32_gelu_and_its_gradient_at_zeros_nan_and_far_out_match_torch(torch):
    x = np.array([0.0, -0.0, math.nan, -30.0, 30.0, -1e-30, 1e-40], np.float32)
    results = []
    for lib in (ng, torch):
        t = lib.tensor(x, requires_grad=True)
        y = lib.nn.functional.gelu(t)
        y.sum().backward()
        results.append((y.detach().numpy(), t.grad.numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_array_equal(ours, theirs)
        assert (np.signbit(ours) == np.signbit(theirs)).all()


def test_float32_gelu_matches_torch_at_the_gpt_mlp_shape(torch):
    data = np.random.default_rng(0).standard_normal((12, 64, 512)).astype(np.float32) * 2
    grad = np.random.default_rng(1).standard_normal((12, 64, 512)).astype(np.float32)
    results = []
    for lib in (ng, torch):
        x = lib.tensor(data, requires_grad=True)
        y = lib.nn.functional.gelu(x)
        y.backward(lib.tensor(grad))
        results.append((y.detach().numpy(), x.grad.numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1.3e-6, atol=1e-5)  # torch.testing's float32 tolerance


def test_float32_gelu_double_backward_matches_torch(torch):
    data = np.linspace(-4, 4, 33).astype(np.float32)
    results = []
    for lib in (ng, torch):
        x = lib.tensor(data, requires_grad=True)
        (g,) = lib.autograd.grad(lib.nn.functional.gelu(x).sum(), x, create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), x)
        results.append((g.detach().numpy(), gg.numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_gradcheck_in_float64(approximate):
    x = ng.tensor(np.linspace(-3, 3, 13), requires_grad=True)
    assert gradcheck(lambda t: F.gelu(t, approximate=approximate), (x,))
