"""affine_grid and grid_sample against torch: every mode, padding mode and align_corners, gradients with respect
to the input and the grid, and torch's errors and warnings."""

import warnings

import numpy as np
import pytest

import numbagrad
from numbagrad.nn import functional as F


@pytest.mark.torch
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 2, 3, 4, 2), (1, 1, 1, 3)])
@pytest.mark.parametrize("align", [True, False])
def test_affine_grid_matches_torch(size, align, torch):
    rows = 2 if len(size) == 4 else 3
    theta = np.random.default_rng(0).standard_normal((size[0], rows, rows + 1))
    to, tt = numbagrad.tensor(theta, requires_grad=True), torch.tensor(theta, requires_grad=True)
    ours, theirs = F.affine_grid(to, size, align), torch.nn.functional.affine_grid(tt, size, align)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-14)
    ours.square().sum().backward()
    theirs.square().sum().backward()
    np.testing.assert_allclose(to.grad.numpy(), tt.grad.numpy(), rtol=1e-10)


@pytest.mark.torch
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [True, False])
def test_grid_sample_matches_torch(mode, padding_mode, align, torch):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 5, 6))
    grid = rng.uniform(-1.4, 1.4, (2, 4, 3, 2))  # some points outside [-1, 1], to exercise the padding
    xo, xt = numbagrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    go, gt = numbagrad.tensor(grid, requires_grad=True), torch.tensor(grid, requires_grad=True)
    ours = F.grid_sample(xo, go, mode, padding_mode, align)
    theirs = torch.nn.functional.grid_sample(xt, gt, mode, padding_mode, align)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)
    weights = rng.standard_normal(tuple(theirs.shape))
    (ours * numbagrad.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    if mode != "nearest":
        np.testing.assert_allclose(go.grad.numpy(), gt.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_grid_sample_gradcheck():
    rng = np.random.default_rng(2)
    x = numbagrad.tensor(rng.standard_normal((1, 2, 4, 4)), requires_grad=True)
    grid = numbagrad.tensor(rng.uniform(-0.9, 0.9, (1, 3, 2, 2)), requires_grad=True)
    assert numbagrad.autograd.gradcheck(lambda a, g: F.grid_sample(a, g, align_corners=False), (x, grid))


@pytest.mark.torch
def test_errors_and_warnings_match_torch(torch):
    for call in (
        lambda m: m.nn.functional.grid_sample(m.ones(1, 1, 2, 2), m.zeros(1, 1, 1, 2), mode="area"),
        lambda m: m.nn.functional.grid_sample(m.ones(1, 1, 2, 2), m.zeros(1, 1, 1, 2), padding_mode="wrap"),
        lambda m: m.nn.functional.affine_grid(m.zeros(1, 3, 4), (1, 1, 2, 2), False),
        lambda m: m.nn.functional.affine_grid(m.zeros(1, 2, 3), (1, 1, 0, 2), False),
    ):
        with pytest.raises(ValueError) as theirs:
            call(torch)
        with pytest.raises(ValueError) as ours:
            call(numbagrad)
        assert str(ours.value) == str(theirs.value).replace("torch.", "numbagrad.")
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        torch.nn.functional.affine_grid(torch.zeros(1, 2, 3), (1, 1, 2, 2))
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        F.affine_grid(numbagrad.zeros(1, 2, 3), (1, 1, 2, 2))
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]
