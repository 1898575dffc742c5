"""Activation modules against torch: the same constructor arguments give the same repr, output and gradients
(PReLU with torch's parameter loaded through ``state_dict``)."""

import numpy as np
import pytest

import numbagrad
from numbagrad import nn

MODULES = [
    ("CELU", dict(alpha=0.5)),
    ("CELU", dict(inplace=True)),
    ("Hardshrink", dict()),
    ("Hardshrink", dict(lambd=1.0)),
    ("Softshrink", dict(lambd=0.3)),
    ("Threshold", dict(threshold=0.1, value=20.0)),
    ("Threshold", dict(threshold=0.1, value=20.0, inplace=True)),
    ("RReLU", dict(lower=0.2, upper=0.4)),
    ("PReLU", dict()),
    ("PReLU", dict(num_parameters=3, init=0.1)),
    ("Softmax2d", dict()),
]


@pytest.mark.torch
@pytest.mark.parametrize("name, kwargs", MODULES, ids=[f"{m[0]}{m[1]}" for m in MODULES])
def test_module_matches_torch(name, kwargs, torch):
    ours, theirs = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    assert repr(ours) == repr(theirs)
    ours.load_state_dict({k: numbagrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    ours.eval(), theirs.eval()  # RReLU's slopes are random in training
    data = np.random.default_rng(0).uniform(-2, 2, (2, 3, 4, 5)).astype(np.float32)
    x_ours, x_theirs = numbagrad.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    out_ours, out_theirs = ours(x_ours * 1), theirs(x_theirs * 1)
    np.testing.assert_allclose(out_ours.detach().numpy(), out_theirs.detach().numpy(), rtol=1e-6, atol=1e-7)
    out_ours.square().sum().backward()
    out_theirs.square().sum().backward()
    np.testing.assert_allclose(x_ours.grad.numpy(), x_theirs.grad.numpy(), rtol=1e-5, atol=1e-6)
    for (key, p_ours), p_theirs in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p_ours.grad.numpy(), p_theirs.grad.numpy(), rtol=1e-4, err_msg=key)


@pytest.mark.torch
def test_softmax2d_refuses_other_ranks_with_torchs_error(torch):
    with pytest.raises(ValueError) as theirs:
        torch.nn.Softmax2d()(torch.ones(3))
    with pytest.raises(ValueError) as ours:
        nn.Softmax2d()(numbagrad.ones(3))
    assert str(ours.value) == str(theirs.value)


def test_prelu_weight_is_a_parameter_filled_with_init():
    m = nn.PReLU(4, init=0.3)
    assert [name for name, _ in m.named_parameters()] == ["weight"]
    np.testing.assert_allclose(m.weight.detach().numpy(), [0.3] * 4, rtol=1e-6)
