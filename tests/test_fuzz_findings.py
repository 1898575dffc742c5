"""Disagreements with torch that tests/test_fuzz_torch.py found, each pinned by the smallest program that showed
it (values, dtypes or exception types compared with torch)."""

import numpy as np
import pytest

import numbagrad


def _error(lib, program):
    with pytest.raises(Exception) as info:
        program(lib)
    return type(info.value).__name__, str(info.value)


def test_functional_batch_norm_takes_a_float_momentum_only(torch):
    def program(m):
        return m.nn.functional.batch_norm(m.zeros(2, 1), m.zeros(1), m.ones(1), training=True, momentum=None)

    assert _error(numbagrad, program) == _error(torch, program)


@pytest.mark.parametrize(("padding", "dilation"), [(2, 2), ((1, 2), (1, 2)), (3, 2), (2, 1)])
def test_dilated_max_pool2d_padding_is_at_most_half_the_kernel(torch, padding, dilation):
    def program(m):
        return m.nn.functional.max_pool2d(m.zeros(1, 1, 9, 9), 3, None, padding, dilation=dilation)

    assert _error(numbagrad, program) == _error(torch, program)


@pytest.mark.parametrize(
    ("a", "b", "dims"), [((1, 1), (2, 2), 1), ((2, 2), (1, 3), 1), ((3, 1), (3, 2), ([0, 1], [0, 1]))]
)
def test_tensordot_broadcasts_a_contracted_dim_of_size_one(torch, a, b, dims):
    results = []
    for lib in (numbagrad, torch):
        x = lib.arange(1.0, 1.0 + np.prod(a), dtype=lib.float64).reshape(a).requires_grad_()
        y = lib.arange(2.0, 2.0 + np.prod(b), dtype=lib.float64).reshape(b).requires_grad_()
        out = lib.tensordot(x, y, dims)
        out.sum().backward()
        results.append((out.tolist(), x.grad.tolist(), y.grad.tolist()))
    assert results[0] == results[1]


@pytest.mark.parametrize("dim", [(0, 1, -1), [0, 1, 2]])
def test_frobenius_norm_over_more_than_two_dims_is_refused(torch, dim):
    def program(m):
        return m.zeros(1, 2, 3).norm(dim=dim)

    assert _error(numbagrad, program) == _error(torch, program)


def test_area_interpolation_to_an_empty_grid_refuses_backward(torch):
    def program(m):
        x = m.zeros(1, 1, 1, 1, dtype=m.float64, requires_grad=True)
        y = m.nn.functional.interpolate(x * 1, scale_factor=0.5, mode="area")
        assert tuple(y.shape) == (1, 1, 0, 0)
        y.sum().backward()

    assert _error(numbagrad, program) == _error(torch, program)


@pytest.mark.parametrize(
    "index",
    [
        lambda m: (0, slice(0, 0), m.tensor([1])),
        lambda m: (0, slice(2, None), m.tensor([3])),
        lambda m: (Ellipsis, slice(0, 0), m.tensor([4, 0])),
    ],
)
def test_an_index_array_selecting_nothing_is_not_bounds_checked(torch, index):
    ours = numbagrad.zeros(1, 2, 1, requires_grad=True)
    theirs = torch.zeros(1, 2, 1, requires_grad=True)
    got, want = ours[index(numbagrad)], theirs[index(torch)]
    assert tuple(got.shape) == tuple(want.shape)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())
