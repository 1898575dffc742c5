"""var and std over given dims: the small-array path (numpy's ufuncs, ``backend.cpu.spread``) and the kernel path
give torch's values, dtypes, gradients and errors, and the same bits as each other."""

import warnings

import numpy as np
import pytest

import numbagrad
from numbagrad.backend import cpu
from torch_oracle import raises_like

SHAPES_AND_DIMS = [((4, 8), 0), ((4, 8), -1), ((2, 3, 4), (0, 2)), ((2, 3, 4), (2, 1)), ((5,), 0), ((3, 4), (0, 1))]


def _pair(torch, shape, dtype=np.float32, seed=0):
    data = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return (
        numbagrad.tensor(data, requires_grad=True),
        torch.tensor(data, requires_grad=True),
    )


@pytest.mark.parametrize("shape, dim", SHAPES_AND_DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_var_matches_torch_values_dtype_and_grad(torch, shape, dim, keepdim, dtype):
    ours, theirs = _pair(torch, shape, dtype)
    a, b = ours.var(dim, keepdim=keepdim), theirs.var(dim, keepdim=keepdim)
    assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1] and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    g = np.random.default_rng(1).standard_normal(tuple(b.shape)).astype(dtype)
    a.backward(numbagrad.tensor(g))
    b.backward(torch.tensor(g))
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert a.grad_fn.name() == b.grad_fn.name()


@pytest.mark.parametrize("correction", [0, 2])
def test_var_with_correction_matches_torch(torch, correction):
    ours, theirs = _pair(torch, (3, 5))
    a, b = ours.var(1, correction=correction), theirs.var(1, correction=correction)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5)
    a.sum().backward()
    b.sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-5)


def test_std_matches_torch_with_its_gradient(torch):
    ours, theirs = _pair(torch, (4, 6))
    a, b = ours.std(0), theirs.std(0)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5)
    a.sum().backward()
    b.sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-5)


def test_small_and_kernel_paths_give_the_same_bits():
    """The numpy path below ``_KERNEL_SUM_SIZE`` and the reduce-and-kernels composition it replaces agree exactly,
    forward and backward."""
    a = np.random.default_rng(2).standard_normal((6, 7, 5)).astype(np.float32)
    g = np.random.default_rng(3).standard_normal((1, 7, 1)).astype(np.float32)
    for axes in [(0,), (1,), (2,), (0, 2), (0, 1, 2)]:
        mean = cpu.divide_by(cpu.reduce(a, "sum", axes, True, a.dtype), int(np.prod([a.shape[d] for d in axes])))
        centered = cpu.elementwise(cpu._SUB_ROW, [a, mean], (), a.dtype)
        squares = cpu.elementwise(cpu._MUL_ROW, [centered, centered], (), a.dtype)
        expected = cpu.divide_by(cpu.reduce(squares, "sum", axes, False, a.dtype), 4.0)
        assert np.array_equal(cpu.spread(a, axes, False, 4.0), expected)
        gk = g if axes == (0, 2) else np.ones([1 if d in axes else n for d, n in enumerate(a.shape)], np.float32)
        product = cpu.elementwise(cpu._MUL_ROW, [gk, centered], (), a.dtype)
        expected_grad = cpu.elementwise(cpu._MUL_ROW, [product, 2.0 / 4.0], (), a.dtype)
        assert np.array_equal(cpu.spread_grad(gk, a, axes, 4.0), expected_grad)


def test_gradient_without_and_with_create_graph_agree():
    x = numbagrad.tensor(np.random.default_rng(4).standard_normal((3, 4)), requires_grad=True)
    (plain,) = numbagrad.autograd.grad(x.var(0).sum(), x)
    (graphed,) = numbagrad.autograd.grad(x.var(0).sum(), x, create_graph=True)
    assert np.array_equal(plain.numpy(), graphed.detach().numpy())


def test_double_backward_passes_gradcheck():
    x = numbagrad.tensor(np.random.default_rng(5).standard_normal((3, 4)), requires_grad=True)
    assert numbagrad.autograd.gradgradcheck(lambda t: t.var(1), (x,))


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.tensor([[1.0, 2.0], [3.0, 4.0]]).t().var(0),  # non-contiguous: the kernel path
        lambda lib: lib.tensor([[1.0, float("inf")], [float("-inf"), 4.0]]).var(0),  # inf - inf: nan, no warning
        lambda lib: lib.tensor([[1.0, float("nan")], [2.0, 4.0]], dtype=lib.float64).var(1, keepdim=True),
        lambda lib: lib.zeros(0, 3).var(1),  # no elements
        lambda lib: lib.tensor([[1.0, 2.0]]).var(1, correction=0.5),  # a fractional correction
    ],
)
def test_edge_inputs_match_torch_without_warnings(torch, make):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = make(numbagrad)
    theirs = make(torch)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, equal_nan=True)


def test_one_element_per_result_warns_as_torch(torch):
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        ours = numbagrad.ones(1, 3).var(0)
    assert np.isnan(ours.numpy()).all() and np.isnan(torch.ones(1, 3).var(0).numpy()).all()


@pytest.mark.parametrize("lib_name", ["torch", "numbagrad"])
def test_version_check_refuses_a_changed_input(torch, lib_name):
    lib = torch if lib_name == "torch" else numbagrad
    y = lib.ones(3, 4, requires_grad=True) * 1
    v = y.var(0)
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*is at version 1; expected version 0"):
        v.sum().backward()


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.tensor([[1, 2], [3, 4]]).var(0),
        lambda lib: lib.ones(2, 3).var(2),
        lambda lib: lib.ones(2, 3).var((0, 0)),
    ],
)
def test_bad_input_raises_torch_error(torch, make):
    raises_like(torch, make)
