"""2-d max pooling walks a window wholly inside its plane through a table of tap offsets and a clipped one (padding,
dilation past the edge) tap by tap: values, indices and gradients equal torch's for both kinds, with NaN, -inf and
ties deciding which element wins."""

import numpy as np
import pytest

import numbagrad
from numbagrad.nn import functional as F


def _special_values(shape: tuple, dtype) -> np.ndarray:
    """Small integers (many ties: the first maximum wins) with NaNs (the last one wins) and -infs sprinkled in."""
    x = np.random.default_rng(0).integers(-1, 2, shape).astype(dtype)
    flat = x.reshape(-1)
    flat[::17] = np.nan
    flat[3::11] = -np.inf
    return x


@pytest.mark.parametrize(
    ("shape", "kw"),
    [
        ((2, 3, 8, 8), {"kernel_size": 2}),  # every window inside
        ((2, 3, 9, 7), {"kernel_size": 3, "stride": 2, "padding": 1}),  # the edge windows clipped
        ((1, 2, 11, 10), {"kernel_size": (3, 2), "stride": (1, 2), "padding": (1, 1), "dilation": (2, 1)}),
        ((1, 2, 5, 5), {"kernel_size": 3, "stride": 3, "padding": 1, "dilation": 3}),
        ((1, 1, 6, 6), {"kernel_size": 3, "stride": 1, "ceil_mode": True}),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool2d_values_and_indices_match_torch(torch, shape, kw, dtype):
    x = _special_values(shape, dtype)
    out, idx = F.max_pool2d(numbagrad.tensor(x), return_indices=True, **kw)
    expected, expected_idx = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kw)
    np.testing.assert_array_equal(out.numpy(), expected.numpy())
    np.testing.assert_array_equal(idx.numpy(), expected_idx.numpy())


@pytest.mark.parametrize(
    ("shape", "kw"),
    [
        ((2, 3, 8, 8), {"kernel_size": 2}),
        ((2, 3, 9, 7), {"kernel_size": 3, "stride": 2, "padding": 1}),
        ((1, 2, 7, 6), {"kernel_size": 2, "stride": 1, "dilation": 2}),
        ((1, 2, 5, 5), {"kernel_size": 3, "stride": 3, "padding": 1, "dilation": 3}),
        ((2, 3, 7, 5), {"kernel_size": (3, 2), "stride": 1}),  # overlapping windows: a gradient summed twice
    ],
)
def test_max_pool2d_gradient_matches_torch(torch, shape, kw):
    x = np.random.default_rng(1).standard_normal(shape)
    ours, theirs = numbagrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_ours, out_theirs = F.max_pool2d(ours, **kw), torch.nn.functional.max_pool2d(theirs, **kw)
    g = np.random.default_rng(2).standard_normal(tuple(out_theirs.shape))
    out_ours.backward(numbagrad.tensor(g))
    out_theirs.backward(torch.tensor(g))
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())
