"""A stride-1 convolution with fewer output channels than input ones makes its input gradient as the convolution
of the output gradient by the flipped weight: gradients equal torch's for the padding range it covers (none up to
``dilation * (kernel - 1)``), dilation, rectangular and even kernels ('same' padding), batches split in chunks,
and for the stride-1 transposed convolution (whose forward is that gradient); geometries outside the range (more
padding, stride 2, more output channels) keep ``col2im``."""

import numpy as np
import pytest

import numbagrad


def _grads(lib, x, w, transposed=False, **kw):
    xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
    conv = lib.nn.functional.conv_transpose2d if transposed else lib.nn.functional.conv2d
    out = conv(xt, wt, **kw)
    out.backward(lib.tensor(np.random.default_rng(1).standard_normal(tuple(out.shape))))
    return out.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()


@pytest.mark.parametrize(
    ("shape", "out_channels", "kernel", "kw"),
    [
        ((2, 6, 7, 7), 2, (3, 3), {"padding": 1}),
        ((2, 6, 7, 7), 2, (3, 3), {}),  # no padding
        ((2, 6, 7, 7), 2, (3, 3), {"padding": 2}),  # the most padding it covers
        ((2, 6, 9, 8), 3, (3, 2), {"padding": (1, 0), "dilation": (2, 1)}),
        ((2, 6, 6, 6), 2, (4, 4), {"padding": "same"}),  # an even kernel: padded 1 before, 2 after
        ((5, 24, 24, 24), 8, (3, 3), {"padding": 1}),  # chunks of samples
        ((2, 6, 7, 7), 2, (3, 3), {"padding": 3}),  # beyond it: col2im
        ((2, 6, 7, 7), 2, (3, 3), {"padding": 1, "stride": 2}),  # strided: col2im
        ((2, 2, 7, 7), 6, (3, 3), {"padding": 1}),  # more output channels: col2im
    ],
)
def test_conv2d_gradients_match_torch(torch, shape, out_channels, kernel, kw):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(shape), rng.standard_normal((out_channels, shape[1], *kernel))
    for ours, theirs in zip(_grads(numbagrad, x, w, **kw), _grads(torch, x, w, **kw)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kw", [{}, {"padding": 1}, {"dilation": 2, "padding": 1}])
def test_stride_1_conv_transpose2d_matches_torch(torch, kw):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3, 5, 5)), rng.standard_normal((3, 7, 3, 3))
    for ours, theirs in zip(_grads(numbagrad, x, w, True, **kw), _grads(torch, x, w, True, **kw)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10)


def test_conv2d_input_gradient_in_float32_matches_torch(torch):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 24, 16, 16)).astype(np.float32)
    w = rng.standard_normal((8, 24, 3, 3)).astype(np.float32)
    for ours, theirs in zip(_grads(numbagrad, x, w, padding=1), _grads(torch, x, w, padding=1)):
        assert ours.dtype == theirs.dtype == np.float32
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
