"""The CPU convolution makes its columns a chunk of samples at a time and keeps only its input for the backward:
forward and gradients equal torch's for batches of one, several or a part of a chunk, 1x1 kernels (whose columns
are the input itself), and the graph holds no columns once the backward has run."""

import numpy as np
import pytest

import numbagrad
from numbagrad.nn import functional as F


def _compare(torch, x, w, bias=None, transposed=False, atol=1e-4, **kw):
    """Forward, and the gradients of input, weight and bias, against torch's for the same arrays."""
    ours = [numbagrad.tensor(a, requires_grad=True) if a is not None else None for a in (x, w, bias)]
    theirs = [torch.tensor(a, requires_grad=True) if a is not None else None for a in (x, w, bias)]
    conv_ours = F.conv_transpose2d if transposed else F.conv2d
    conv_theirs = torch.nn.functional.conv_transpose2d if transposed else torch.nn.functional.conv2d
    out_ours, out_theirs = conv_ours(*ours, **kw), conv_theirs(*theirs, **kw)
    np.testing.assert_allclose(out_ours.detach().numpy(), out_theirs.detach().numpy(), rtol=1e-4, atol=atol)
    g = np.random.default_rng(1).standard_normal(tuple(out_theirs.shape)).astype(x.dtype)
    out_ours.backward(numbagrad.tensor(g))
    out_theirs.backward(torch.tensor(g))
    for a, b in zip(ours, theirs):
        if a is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=atol)


@pytest.mark.parametrize(
    ("shape", "out_channels", "kernel", "kw"),
    [
        ((5, 16, 24, 24), 8, 3, {"padding": 1}),  # two chunks, the last one shorter
        ((2, 32, 32, 32), 4, 3, {"padding": 1}),  # one sample's columns fill a chunk
        ((1, 3, 9, 7), 5, 3, {"stride": 2, "dilation": 2}),
        ((3, 6, 5, 5), 4, 1, {}),  # 1x1: the columns are the input
        ((3, 6, 5, 5), 4, 1, {"stride": 2}),
        ((0, 3, 5, 5), 2, 3, {}),  # no samples
    ],
)
def test_conv2d_matches_torch_in_chunks(torch, shape, out_channels, kernel, kw):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((out_channels, shape[1], kernel, kernel)).astype(np.float32)
    b = rng.standard_normal(out_channels).astype(np.float32)
    _compare(torch, x, w, b, **kw)


def test_grouped_conv2d_matches_torch(torch):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 6, 6))
    w = rng.standard_normal((6, 2, 3, 3))
    _compare(torch, x, w, groups=2, padding=1, atol=1e-10)


@pytest.mark.parametrize("kw", [{"stride": 2, "padding": 1}, {"stride": 1}])
def test_conv_transpose2d_matches_torch(torch, kw):
    """Its backward convolves the output gradient, whose input (kept, not its columns) gives the weight's."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 8, 5, 5)).astype(np.float32)
    w = rng.standard_normal((8, 4, 4, 4)).astype(np.float32)
    _compare(torch, x, w, transposed=True, **kw)


def test_conv2d_gradcheck_in_float64():
    rng = np.random.default_rng(0)
    x = numbagrad.tensor(rng.standard_normal((2, 3, 5, 5)), requires_grad=True)
    w = numbagrad.tensor(rng.standard_normal((4, 3, 3, 3)), requires_grad=True)
    assert numbagrad.autograd.gradcheck(lambda x, w: F.conv2d(x, w, padding=1, stride=2), (x, w))
    assert numbagrad.autograd.gradgradcheck(lambda x, w: F.conv2d(x, w, padding=1), (x, w))


def test_conv2d_backward_releases_what_the_forward_kept():
    """After a backward without retain_graph the node holds nothing of its forward (torch frees a node's saved
    values then); a second backward raises torch's error."""
    x = numbagrad.randn(2, 3, 6, 6, requires_grad=True)
    w = numbagrad.randn(4, 3, 3, 3, requires_grad=True)
    loss = F.conv2d(x.relu(), w).sum()
    node = loss.grad_fn.next_functions[0][0]
    assert node.kept is not None
    loss.backward()
    assert node.kept is None
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        loss.backward()


def test_conv2d_backward_with_retain_graph_runs_twice(torch):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3))
    grads = []
    for lib in (numbagrad, torch):
        xt = lib.tensor(x, requires_grad=True)
        loss = lib.nn.functional.conv2d(xt, lib.tensor(w)).square().sum()
        loss.backward(retain_graph=True)
        loss.backward()
        grads.append(xt.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10)
