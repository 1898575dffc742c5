"""Training-mode batch norm (one kernel call for the forward and one for the backward): outputs, running
statistics and gradients equal torch's, with and without the affine parameters and the running statistics."""

import numpy as np
import pytest

import numbagrad


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("track", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_norm2d_training_step_matches_torch(torch, affine, track, dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 3, 5, 5)) * 2 + 1).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    results = []
    for lib in (numbagrad, torch):
        m = lib.nn.BatchNorm2d(3, affine=affine, track_running_stats=track).to(getattr(lib, dtype))
        if affine:
            with lib.no_grad():
                m.weight.copy_(lib.tensor([0.5, -1.0, 2.0]))
                m.bias.copy_(lib.tensor([0.1, 0.2, -0.3]))
        xt = lib.tensor(x, requires_grad=True)
        out = m(xt)
        out.backward(lib.tensor(g))
        got = [out.detach().numpy(), xt.grad.numpy()]
        got += [m.weight.grad.numpy(), m.bias.grad.numpy()] if affine else []
        got += [m.running_mean.numpy(), m.running_var.numpy()] if track else []
        results.append(got)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for ours, theirs in zip(*results):
        assert ours.dtype == theirs.dtype
        np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)


def test_batch_norm_training_gradcheck():
    rng = np.random.default_rng(1)
    x = numbagrad.tensor(rng.standard_normal((3, 2, 4)), requires_grad=True)
    w = numbagrad.tensor(rng.standard_normal(2), requires_grad=True)
    b = numbagrad.tensor(rng.standard_normal(2), requires_grad=True)

    def fn(x, w, b):
        return numbagrad.nn.functional.batch_norm(x, None, None, w, b, training=True)

    assert numbagrad.autograd.gradcheck(fn, (x, w, b))


def test_batch_norm_input_gradient_alone_matches_torch(torch):
    """Without parameters to differentiate, only the input's gradient is made."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)
    grads = []
    for lib in (numbagrad, torch):
        xt = lib.tensor(x, requires_grad=True)
        lib.nn.functional.batch_norm(xt, None, None, training=True).square().sum().backward()
        grads.append(xt.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-4, atol=1e-5)
