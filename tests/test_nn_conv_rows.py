"""A convolution's weight gradient from transposed columns (``nn_kernels.im2row``), used where a chunk holds several
samples whose columns come from the table walk (strided or short output rows): the rows are ``im2col``'s columns
transposed per sample, and the gradients equal torch's."""

import numpy as np
import pytest

import numbagrad
from numbagrad.backend import cpu
from numbagrad.nn import functional as F


@pytest.mark.parametrize(
    ("shape", "kernel", "stride", "padding", "dilation"),
    [((3, 4, 8, 8), (4, 4), (2, 2), (1, 1), (1, 1)), ((2, 3, 7, 6), (3, 2), (1, 2), (2, 0), (2, 1))],
)
def test_im2row_is_im2col_transposed_per_sample(shape, kernel, stride, padding, dilation):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out_hw = tuple(
        (s + 2 * p - d * (k - 1) - 1) // st + 1 for s, k, st, p, d in zip(shape[2:], kernel, stride, padding, dilation)
    )
    k, length = shape[1] * kernel[0] * kernel[1], out_hw[0] * out_hw[1]
    cols = np.empty((shape[0], k, length), np.float32)
    rows = np.empty((shape[0], length, k), np.float32)
    kernels = cpu._nn()
    kernels.im2col(x, *kernel, *stride, *padding, *dilation, *out_hw, cols)
    kernels.im2row(x, *kernel, *stride, *padding, *dilation, *out_hw, rows)
    np.testing.assert_array_equal(rows, cols.transpose(0, 2, 1))


@pytest.mark.parametrize("need_x", [True, False])
@pytest.mark.parametrize(
    ("shape", "out_channels", "kernel", "kw"),
    [
        ((6, 5, 8, 8), 7, 4, {"stride": 2, "padding": 1}),  # strided, several samples a chunk (the DCGAN's)
        ((4, 3, 6, 6), 4, 3, {"padding": 1}),  # stride 1, rows shorter than the row walk's
    ],
)
def test_conv2d_weight_gradient_from_rows_matches_torch(torch, shape, out_channels, kernel, kw, need_x):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((out_channels, shape[1], kernel, kernel)).astype(np.float32)
    ours, theirs = numbagrad.tensor(x, requires_grad=need_x), torch.tensor(x, requires_grad=need_x)
    w_ours, w_theirs = numbagrad.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
    out, t_out = F.conv2d(ours, w_ours, **kw), torch.nn.functional.conv2d(theirs, w_theirs, **kw)
    g = rng.standard_normal(tuple(t_out.shape)).astype(np.float32)
    out.backward(numbagrad.tensor(g))
    t_out.backward(torch.tensor(g))
    np.testing.assert_allclose(w_ours.grad.numpy(), w_theirs.grad.numpy(), rtol=1e-4, atol=1e-4)
    if need_x:
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_conv2d_weight_gradient_from_rows_passes_gradcheck():
    rng = np.random.default_rng(0)
    x = numbagrad.tensor(rng.standard_normal((3, 2, 6, 6)), requires_grad=True)
    w = numbagrad.tensor(rng.standard_normal((3, 2, 4, 4)), requires_grad=True)
    assert numbagrad.autograd.gradcheck(lambda x, w: F.conv2d(x, w, stride=2, padding=1), (x, w))


def test_conv2d_weight_gradient_from_rows_in_several_chunks_matches_torch(torch, monkeypatch):
    monkeypatch.setattr(cpu, "_ROWS_CHUNK_BYTES", 1 << 13)  # (two samples' rows a chunk: three chunks)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((6, 5, 8, 8)).astype(np.float32), rng.standard_normal((7, 5, 4, 4)).astype(np.float32)
    ours = [numbagrad.tensor(a, requires_grad=True) for a in (x, w)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (x, w)]
    F.conv2d(*ours, stride=2, padding=1).square().sum().backward()
    torch.nn.functional.conv2d(*theirs, stride=2, padding=1).square().sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-3)
