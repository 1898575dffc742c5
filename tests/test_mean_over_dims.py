"""Means and sums over given dims (a batch statistic's ``x.mean((0, 1), keepdim=True)``) take a direct path: the
dims normalised without the general parser, the node built without ``apply``'s scan, the division by the count
on the few elements left. Each is held to torch on values, dtypes, gradients, node names and errors."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numbagrad
from numbagrad.autograd import gradcheck
from numbagrad.backend import cpu

DIMS = [0, -1, (0, 1), (1, 0), (-1, 0), (0, 2), (0, 1, 2), (2,)]


def _pair(torch, shape, dtype=np.float32, requires_grad=True):
    a = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    return numbagrad.tensor(a, requires_grad=requires_grad), torch.tensor(a, requires_grad=requires_grad)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS)
def test_mean_over_dims_matches_torch_values_node_and_gradient(torch, dim, keepdim):
    ours, theirs = _pair(torch, (32, 4, 6))
    a, b = ours.mean(dim, keepdim=keepdim), theirs.mean(dim, keepdim=keepdim)
    assert tuple(a.shape) == tuple(b.shape) and a.dtype == numbagrad.float32
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-7)  # (summing orders)
    assert type(a.grad_fn).__name__ == type(b.grad_fn).__name__ == "MeanBackward1"
    g = np.arange(float(b.numel())).reshape(tuple(b.shape)).astype(np.float32)
    a.backward(numbagrad.tensor(g))
    b.backward(torch.tensor(g))
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


def test_mean_of_a_large_batch_statistic_matches_torch(torch):
    """From 4096 elements the sum over the leading dims is the compiled loop (a middle axis of the storage)."""
    ours, theirs = _pair(torch, (32, 4, 128), requires_grad=False)
    a, b = ours.mean((0, 1), keepdim=True), theirs.mean((0, 1), keepdim=True)
    assert tuple(a.shape) == (1, 1, 128)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_mean_over_dims_keeps_the_dtype(torch, dtype):
    ours, theirs = _pair(torch, (8, 3, 5), dtype)
    a, b = ours.mean((0, 1), keepdim=True), theirs.mean((0, 1), keepdim=True)
    assert a.dtype == getattr(numbagrad, str(b.dtype).split(".")[1])
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-3 if dtype == np.float16 else 1e-12)


def test_mean_over_dims_of_bfloat16_matches_torch(torch):
    a = np.random.default_rng(2).standard_normal((6, 4, 3)).astype(np.float32)
    ours = numbagrad.tensor(a).to(numbagrad.bfloat16).mean((0, 1), keepdim=True)
    theirs = torch.tensor(a).to(torch.bfloat16).mean((0, 1), keepdim=True)
    assert ours.dtype == numbagrad.bfloat16
    np.testing.assert_array_equal(ours.float().numpy(), theirs.float().numpy())


def test_mean_over_dims_is_a_new_storage():
    x = numbagrad.ones(1, 3)
    m = x.mean(0, keepdim=True)
    m.add_(1)
    assert x.tolist() == [[1.0, 1.0, 1.0]] and m.tolist() == [[2.0, 2.0, 2.0]]


def test_mean_under_no_grad_records_nothing():
    x = numbagrad.ones(4, 3, requires_grad=True)
    with numbagrad.no_grad():
        m = x.mean((0, 1), keepdim=True)
    assert m.grad_fn is None and not m.requires_grad


def test_mean_over_dims_gradient_is_differentiable_again():
    x = numbagrad.tensor(np.random.default_rng(3).standard_normal((3, 2, 4)), requires_grad=True)
    assert gradcheck(lambda t: (t.mean((0, 1), keepdim=True) ** 2).sum(), (x,))
    (g,) = numbagrad.autograd.grad((x.mean((0, 1)) ** 2).sum(), x, create_graph=True)
    assert g.grad_fn is not None


@pytest.mark.parametrize(
    "dim",
    [(0, 0), (0, -3), 3, (0, 3), -4],
)
def test_bad_dims_raise_torchs_error(torch, dim):
    ours, theirs = _pair(torch, (2, 3, 4))
    with pytest.raises(Exception) as expected:
        theirs.mean(dim)
    with pytest.raises(type(expected.value)) as got:
        ours.mean(dim)
    assert str(got.value) == str(expected.value)


def test_mean_of_an_integer_tensor_is_refused_as_torch(torch):
    with pytest.raises(RuntimeError) as expected:
        torch.ones(2, 3, dtype=torch.int64).mean((0, 1))
    with pytest.raises(RuntimeError) as got:
        numbagrad.ones(2, 3, dtype=numbagrad.int64).mean((0, 1))
    assert str(got.value) == str(expected.value)


def test_mean_over_a_list_of_dims_matches_torch(torch):
    ours, theirs = _pair(torch, (4, 3, 2))
    np.testing.assert_allclose(ours.mean([0, 2]).detach().numpy(), theirs.mean([0, 2]).detach().numpy(), rtol=1e-6)


def _warned(call) -> tuple:
    """``call()``'s result and the warnings it gave (torch's C++ suffix cut), numpy's included."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call()
    return out, [str(w.message).split(" (Triggered internally")[0] for w in caught]


@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
@pytest.mark.parametrize("correction", [0, 1, 1.5, 2, 3])
def test_spread_with_few_degrees_of_freedom_matches_torch_and_its_warning(torch, name, correction):
    """The division by ``N - correction`` is numpy's only from 1 on: below, inf and nan come without numpy's
    warnings, and none left gives torch's own."""
    ours, theirs = _pair(torch, (2, 1, 3), requires_grad=False)
    a, ours_warned = _warned(lambda: getattr(numbagrad, name)(ours, (0, 1), correction=correction))
    b, theirs_warned = _warned(lambda: getattr(torch, name)(theirs, (0, 1), correction=correction))
    assert ours_warned == theirs_warned
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-6)


@settings(max_examples=25, deadline=None)
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=4),
    data=st.data(),
    keepdim=st.booleans(),
)
def test_sum_and_mean_over_any_dims_match_numpy(shape, data, keepdim):
    n = len(shape)
    dims = data.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=n, unique_by=lambda d: d % n))
    a = np.random.default_rng(4).standard_normal(shape)
    x = numbagrad.tensor(a)
    axes = tuple(d % n for d in dims)
    np.testing.assert_allclose(x.sum(tuple(dims), keepdim=keepdim).numpy(), a.sum(axes, keepdims=keepdim))
    np.testing.assert_allclose(x.mean(tuple(dims), keepdim=keepdim).numpy(), a.mean(axes, keepdims=keepdim))


@pytest.mark.parametrize("shape", [(64, 64, 2), (2, 64, 64), (4, 2048)])
def test_compiled_sum_over_axes_matches_torch_for_each_shape(torch, shape):
    """The loop's plan is kept per shape and dims: shapes in turn with the same dims each get their own."""
    a = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    for dims in [(0, 1), (1,), (0,)]:
        for keepdim in (False, True):
            ours = numbagrad.tensor(a).sum(dims, keepdim=keepdim)
            theirs = torch.tensor(a).sum(dims, keepdim=keepdim)
            assert tuple(ours.shape) == tuple(theirs.shape)
            np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-4)


def test_divide_by_keeps_a_transposed_layout():
    a = np.arange(12.0, dtype=np.float32).reshape(3, 4).T
    out = cpu.divide_by(a, 2)
    assert out.strides == a.strides and not np.shares_memory(out, a)
    np.testing.assert_array_equal(out, a / 2)
