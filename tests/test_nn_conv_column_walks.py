"""im2col and col2im walk long stride-1 output rows row by row and short or strided ones through a table of each
column entry's source: ``unfold``, ``fold`` and the convolution's gradients equal torch's on either side of the
switch (rows of 7 and 8 at stride 1, strided rows, dilation, padding wider than the kernel reaches)."""

import numpy as np
import pytest

import numbagrad
from numbagrad.nn import functional as F

GEOMETRIES = [
    ((2, 3, 8, 8), {"kernel_size": 3, "padding": 1}),  # stride 1, rows of 8: row by row
    ((2, 3, 7, 7), {"kernel_size": 3, "padding": 1}),  # stride 1, rows of 7: the table
    ((2, 3, 9, 10), {"kernel_size": (2, 3), "stride": (1, 2), "padding": 1}),  # strided rows
    ((1, 2, 9, 7), {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2}),
    ((1, 2, 12, 11), {"kernel_size": 3, "dilation": (1, 2), "padding": (0, 2)}),  # dilated stride-1 rows of 7
    ((1, 2, 3, 3), {"kernel_size": 3, "stride": 2, "padding": 3}),  # some windows wholly in the padding
    ((2, 4, 8, 8), {"kernel_size": 4, "stride": 2, "padding": 1}),  # the DCGAN's discriminator geometry
]


@pytest.mark.parametrize(("shape", "kw"), GEOMETRIES)
def test_unfold_matches_torch(torch, shape, kw):
    x = np.random.default_rng(0).standard_normal(shape)
    expected = torch.nn.functional.unfold(torch.tensor(x), **kw).numpy()
    np.testing.assert_array_equal(F.unfold(numbagrad.tensor(x), **kw).numpy(), expected)


@pytest.mark.parametrize(("shape", "kw"), GEOMETRIES)
def test_fold_matches_torch(torch, shape, kw):
    cols = torch.nn.functional.unfold(torch.zeros(shape, dtype=torch.float64), **kw)
    c = np.random.default_rng(0).standard_normal(tuple(cols.shape))
    expected = torch.nn.functional.fold(torch.tensor(c), shape[2:], **kw).numpy()
    np.testing.assert_allclose(F.fold(numbagrad.tensor(c), shape[2:], **kw).numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize(("shape", "kw"), GEOMETRIES)
def test_conv2d_gradients_match_torch(torch, shape, kw):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    kernel = kw["kernel_size"] if isinstance(kw["kernel_size"], tuple) else (kw["kernel_size"],) * 2
    w = rng.standard_normal((5, shape[1], *kernel))
    args = {k: v for k, v in kw.items() if k != "kernel_size"}
    grads = []
    for lib in (numbagrad, torch):
        xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        out = lib.nn.functional.conv2d(xt, wt, **args)
        out.backward(lib.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape))))
        grads.append((out.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()))
    for ours, theirs in zip(*grads):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
