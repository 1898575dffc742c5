"""torch's deprecated spellings (NLLLoss2d, Container) warn and work as torch's; pdist against torch."""

import warnings

import numpy as np
import pytest

import numbagrad
from numbagrad import nn


@pytest.mark.torch
@pytest.mark.parametrize("make", [lambda m: m.nn.NLLLoss2d(), lambda m: m.nn.Container(a=m.nn.Identity())])
def test_deprecated_modules_warn_as_torch(make, torch):
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        their_module = make(torch)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        our_module = make(numbagrad)
    assert [(w.category, str(w.message)) for w in ours] == [(w.category, str(w.message)) for w in theirs]
    assert repr(our_module) == repr(their_module)


def test_nll_loss_2d_is_nll_loss():
    logp = numbagrad.randn(2, 3, 4, 4).log_softmax(1)
    target = numbagrad.randint(0, 3, (2, 4, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loss = nn.NLLLoss2d()(logp, target)
    assert loss.item() == nn.NLLLoss()(logp, target).item()


@pytest.mark.torch
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.0])
def test_pdist_matches_torch(p, torch):
    x = np.random.default_rng(0).standard_normal((5, 3))
    ours_in, theirs_in = numbagrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours, theirs = nn.functional.pdist(ours_in, p), torch.nn.functional.pdist(theirs_in, p)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12)
    if p:
        ours.sum().backward()
        theirs.sum().backward()
        np.testing.assert_allclose(ours_in.grad.numpy(), theirs_in.grad.numpy(), rtol=1e-10)


@pytest.mark.torch
@pytest.mark.parametrize("call", [lambda m: m.nn.functional.pdist(m.ones(2, 3, 4)),
                                  lambda m: m.nn.functional.pdist(m.ones(2, 3), p=-1)])  # fmt: skip
def test_pdist_errors_match_torch(call, torch):
    with pytest.raises(RuntimeError) as theirs:
        call(torch)
    with pytest.raises(RuntimeError) as ours:
        call(numbagrad)
    assert str(ours.value) == str(theirs.value)
