"""meshgrid against torch: grids, views that carry gradients, both indexings, the missing-indexing warning, errors."""

import warnings

import numpy as np
import pytest

import numbagrad


@pytest.mark.torch
@pytest.mark.parametrize("indexing", ["ij", "xy"])
@pytest.mark.parametrize("sizes", [(3, 2), (3, 2, 4), (4,), (0, 2), (1, 3)])
def test_meshgrid_matches_torch(sizes, indexing, torch):
    data = [np.arange(n, dtype=np.float64) + 10 * i for i, n in enumerate(sizes)]
    ours_in = [numbagrad.tensor(d, requires_grad=True) for d in data]
    theirs_in = [torch.tensor(d, requires_grad=True) for d in data]
    ours, theirs = numbagrad.meshgrid(*ours_in, indexing=indexing), torch.meshgrid(*theirs_in, indexing=indexing)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    weights = [np.random.default_rng(i).standard_normal(tuple(b.shape)) for i, b in enumerate(theirs)]
    sum((a * numbagrad.tensor(w)).sum() for a, w in zip(ours, weights)).backward()
    sum((b * torch.tensor(w)).sum() for b, w in zip(theirs, weights)).backward()
    for a, b in zip(ours_in, theirs_in):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy())


def test_meshgrid_takes_a_list_and_zero_dim_tensors():
    a, b = numbagrad.tensor(2.0), numbagrad.tensor([1.0, 3.0])
    x, y = numbagrad.meshgrid([a, b], indexing="ij")
    assert x.tolist() == [[2.0, 2.0]] and y.tolist() == [[1.0, 3.0]]


@pytest.mark.torch
def test_meshgrid_without_indexing_warns_as_torch_and_uses_ij(torch):
    with pytest.warns(UserWarning, match="it will be required to pass the indexing argument"):
        x, _ = numbagrad.meshgrid(numbagrad.arange(3), numbagrad.arange(2))
    assert tuple(x.shape) == (3, 2)


@pytest.mark.torch
@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.meshgrid(m.ones(2), m.ones(3), indexing="zz"),
        lambda m: m.meshgrid(m.ones(2), m.ones(3, dtype=m.int64), indexing="ij"),
        lambda m: m.meshgrid(indexing="ij"),
    ],
)
def test_meshgrid_errors_match_torch(call, torch):
    with pytest.raises(RuntimeError) as theirs:
        call(torch)
    with pytest.raises(RuntimeError) as ours:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call(numbagrad)
    assert str(ours.value) == str(theirs.value)


def test_meshgrid_refuses_matrices():
    with pytest.raises(RuntimeError, match="Expected 0D or 1D tensor"):
        numbagrad.meshgrid(numbagrad.ones(2, 2), numbagrad.ones(3), indexing="ij")
