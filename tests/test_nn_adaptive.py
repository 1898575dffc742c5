"""AdaptiveLogSoftmaxWithLoss against torch: outputs, loss, gradients of input and every parameter with torch's
weights loaded, log_prob, predict, and torch's errors."""

import numpy as np
import pytest

import numbagrad
from numbagrad import nn


def _pair(torch, **kw):
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [4, 10], dtype=torch.float64, **kw)
    ours = nn.AdaptiveLogSoftmaxWithLoss(8, 20, [4, 10], dtype=numbagrad.float64, **kw)
    ours.load_state_dict({k: numbagrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


@pytest.mark.torch
@pytest.mark.parametrize("head_bias", [False, True])
def test_forward_and_gradients_match_torch(head_bias, torch):
    ours, theirs = _pair(torch, head_bias=head_bias)
    assert repr(ours) == repr(theirs)
    rng = np.random.default_rng(0)
    x, target = rng.standard_normal((6, 8)), np.array([0, 3, 5, 12, 19, 9])
    xo, xt = numbagrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_ours, out_theirs = ours(xo, numbagrad.tensor(target)), theirs(xt, torch.tensor(target))
    np.testing.assert_allclose(out_ours.output.detach().numpy(), out_theirs.output.detach().numpy(), rtol=1e-12)
    assert abs(out_ours.loss.item() - out_theirs.loss.item()) < 1e-12
    out_ours.loss.backward()
    out_theirs.loss.backward()
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-14)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-14, err_msg=name)
    np.testing.assert_allclose(ours.log_prob(xo).detach().numpy(), theirs.log_prob(xt).detach().numpy(), rtol=1e-12)
    np.testing.assert_array_equal(ours.predict(xo).numpy(), theirs.predict(xt).numpy())


@pytest.mark.torch
def test_unbatched_input_matches_torch(torch):
    ours, theirs = _pair(torch)
    x = np.random.default_rng(1).standard_normal(8)
    a, b = ours(numbagrad.tensor(x), numbagrad.tensor(15)), theirs(torch.tensor(x), torch.tensor(15))
    assert tuple(a.output.shape) == tuple(b.output.shape) == ()
    assert abs(a.loss.item() - b.loss.item()) < 1e-12


@pytest.mark.torch
@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(8, 20, []),
        lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [10, 4]),
        lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [4, 10])(m.zeros(2, 8), m.tensor([0, 25])),
        lambda m: m.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [4, 10])(m.zeros(2, 8), m.tensor([0, 1, 2])),
    ],
)
def test_errors_match_torch(call, torch):
    with pytest.raises((ValueError, RuntimeError)) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)) as ours:
        call(numbagrad)
    assert str(ours.value) == str(theirs.value)
