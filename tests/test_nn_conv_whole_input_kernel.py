"""A convolution whose undilated, unpadded kernel is as large as its input has one output position, and its
columns are the input itself (no im2col or col2im): values and gradients equal torch's for it and for the
transposed convolution of a 1x1 input (the DCGAN's first generator layer); one output position takes one GEMM
over the samples for each gradient. Nearby geometries (padding, dilation, several positions) take the columns."""

import numpy as np
import pytest

import numbagrad
from numbagrad.nn import functional as F


def _compare(torch, x, w, bias=None, transposed=False, **kw):
    """Forward, and the gradients of input, weight and bias, against torch's for the same arrays."""
    ours = [numbagrad.tensor(a, requires_grad=True) if a is not None else None for a in (x, w, bias)]
    theirs = [torch.tensor(a, requires_grad=True) if a is not None else None for a in (x, w, bias)]
    name = "conv_transpose2d" if transposed else "conv2d"
    out_ours = getattr(F, name)(*ours, **kw)
    out_theirs = getattr(torch.nn.functional, name)(*theirs, **kw)
    np.testing.assert_allclose(out_ours.detach().numpy(), out_theirs.detach().numpy(), rtol=1e-4, atol=1e-4)
    g = np.random.default_rng(1).standard_normal(tuple(out_theirs.shape)).astype(x.dtype)
    out_ours.backward(numbagrad.tensor(g))
    out_theirs.backward(torch.tensor(g))
    for a, b in zip(ours, theirs):
        if a is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("shape", "kernel", "kw"),
    [
        ((16, 32, 4, 4), (4, 4), {}),  # the DCGAN discriminator's last layer
        ((3, 5, 4, 3), (4, 3), {"stride": 2}),  # a rectangular kernel; the stride changes nothing
        ((1, 2, 3, 3), (3, 3), {}),  # one sample
        ((2, 3, 4, 4), (4, 4), {"padding": 1}),  # padded: three positions each way, columns made
        ((2, 3, 5, 5), (3, 3), {"dilation": 2}),  # dilated: one position, columns made
        ((2, 3, 5, 5), (4, 4), {}),  # several positions
    ],
)
def test_conv2d_with_a_kernel_covering_the_input_matches_torch(torch, shape, kernel, kw):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((6, shape[1], *kernel)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    _compare(torch, x, w, b, **kw)


@pytest.mark.parametrize("kw", [{}, {"stride": 2}, {"padding": 1}])
def test_conv_transpose2d_of_a_1x1_input_matches_torch(torch, kw):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 16, 1, 1)).astype(np.float32)
    w = rng.standard_normal((16, 32, 4, 4)).astype(np.float32)
    _compare(torch, x, w, transposed=True, **kw)


def test_conv_transpose2d_of_a_1x1_input_without_input_gradient_matches_torch(torch):
    """The generator's first layer: the noise needs no gradient, the weight's comes from the output gradient's
    columns alone."""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 3, 1, 1)), rng.standard_normal((3, 5, 4, 4))
    grads = []
    for lib in (numbagrad, torch):
        wt = lib.tensor(w, requires_grad=True)
        lib.nn.functional.conv_transpose2d(lib.tensor(x), wt).square().sum().backward()
        grads.append(wt.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10)


def test_conv2d_with_a_kernel_covering_the_input_gradgradcheck_in_float64():
    rng = np.random.default_rng(0)
    x = numbagrad.tensor(rng.standard_normal((3, 2, 3, 3)), requires_grad=True)
    w = numbagrad.tensor(rng.standard_normal((4, 2, 3, 3)), requires_grad=True)
    assert numbagrad.autograd.gradcheck(F.conv2d, (x, w))
    assert numbagrad.autograd.gradgradcheck(F.conv2d, (x, w))


def test_unfold_and_fold_with_a_kernel_covering_the_input_match_torch(torch):
    """``unfold`` returns fresh columns, not the input's storage: writing into them leaves the input intact."""
    x = np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2)
    cols = F.unfold(numbagrad.tensor(x), 2)
    np.testing.assert_array_equal(cols.numpy(), torch.nn.functional.unfold(torch.tensor(x), 2).numpy())
    cols.zero_()
    np.testing.assert_array_equal(F.unfold(numbagrad.tensor(x), 2).numpy(), x.reshape(2, 12, 1))
    c = np.arange(2 * 12, dtype=np.float32).reshape(2, 12, 1)
    folded = F.fold(numbagrad.tensor(c), (2, 2), 2)
    np.testing.assert_array_equal(folded.numpy(), torch.nn.functional.fold(torch.tensor(c), (2, 2), 2).numpy())
