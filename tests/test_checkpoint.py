"""Activation checkpointing (``utils.checkpoint``) against torch: the same gradients as without checkpointing,
dropout recomputed with the same mask, activations not kept, and torch's warnings and errors."""

import gc
import warnings
import weakref

import numpy as np
import pytest

import numbagrad
from numbagrad.utils.checkpoint import checkpoint, checkpoint_sequential


def _grads(lib, use_reentrant, checkpointed: bool, p=0.5):
    lib.manual_seed(0)
    x = lib.tensor(np.linspace(-1, 1, 6).reshape(2, 3), requires_grad=True)
    w = lib.tensor(np.linspace(0.5, 1.5, 9).reshape(3, 3), requires_grad=True)

    def segment(x):
        return lib.nn.functional.dropout((x @ w).tanh(), p, training=True).exp()

    if checkpointed:
        ck = numbagrad.utils.checkpoint if lib is numbagrad else __import__("torch.utils.checkpoint").utils.checkpoint
        y = ck.checkpoint(segment, x, use_reentrant=use_reentrant)
    else:
        y = segment(x)
    y.sum().backward()
    return x.grad.detach().numpy(), w.grad.detach().numpy()


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpointed_gradients_equal_plain_ones_with_dropout(use_reentrant):
    plain = _grads(numbagrad, use_reentrant, False)
    checked = _grads(numbagrad, use_reentrant, True)
    for a, b in zip(plain, checked):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert (plain[0] == 0).any()  # dropout dropped something: the recomputed mask must be the same


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_gradients_match_torch_without_dropout(torch, use_reentrant):
    ours = _grads(numbagrad, use_reentrant, True, p=0.0)
    theirs = _grads(torch, use_reentrant, True, p=0.0)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_non_reentrant_checkpoint_keeps_no_activation():
    x = numbagrad.randn(4, 4, requires_grad=True)
    refs = []

    def segment(x):
        h = x.exp()
        refs.append(weakref.ref(h))
        return h.sin()

    y = checkpoint(segment, x, use_reentrant=False)
    gc.collect()
    assert refs[0]() is None  # exp's output, saved by sin, was not kept
    y.sum().backward()
    with numbagrad.no_grad():
        expected = x.exp().cos() * x.exp()
    np.testing.assert_allclose(x.grad.numpy(), expected.numpy(), rtol=1e-6)


def test_non_reentrant_checkpoint_works_with_autograd_grad(torch):
    def scenario(lib, ck):
        x = lib.tensor([0.5, 1.0, 2.0], dtype=lib.float64, requires_grad=True)
        y = ck(lambda t: (t * t).sin(), x, use_reentrant=False)
        return lib.autograd.grad(y.sum(), x)[0].tolist()

    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    np.testing.assert_allclose(scenario(numbagrad, checkpoint), scenario(torch, torch_checkpoint), rtol=1e-12)


def test_checkpoint_without_use_reentrant_warns(torch):
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    messages = []
    for lib, ck in ((numbagrad, checkpoint), (torch, torch_checkpoint)):
        x = lib.ones(2, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ck(lambda t: t * 2, x)
        messages.append([str(w.message) for w in caught if "use_reentrant" in str(w.message)])
    assert messages[0] == messages[1] and len(messages[0]) == 1


def test_reentrant_checkpoint_rejects_keyword_arguments(torch):
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    errors = []
    for lib, ck in ((numbagrad, checkpoint), (torch, torch_checkpoint)):
        with pytest.raises(ValueError) as info:
            ck(lambda t, scale: t * scale, lib.ones(2, requires_grad=True), use_reentrant=True, scale=2)
        errors.append(str(info.value))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_sequential_matches_torch(torch, use_reentrant):
    from torch.utils.checkpoint import checkpoint_sequential as torch_sequential

    results = []
    for lib, seq in ((numbagrad, checkpoint_sequential), (torch, torch_sequential)):
        lib.manual_seed(0)
        layers = [lambda t: t.tanh(), lambda t: t * 3, lambda t: t.exp(), lambda t: t.sin(), lambda t: t - 1]
        x = lib.tensor(np.linspace(-1, 1, 4), requires_grad=True)
        seq(layers, 2, x, use_reentrant=use_reentrant).sum().backward()
        results.append(x.grad.tolist())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)


def test_reentrant_checkpoint_warns_when_no_input_requires_grad(torch):
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    messages = []
    for lib, ck in ((numbagrad, checkpoint), (torch, torch_checkpoint)):
        w = lib.ones(2, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ck(lambda t, w=w: t * w, lib.ones(2), use_reentrant=True)
        messages.append([str(m.message) for m in caught])
    assert messages[0] == messages[1] == ["None of the inputs have requires_grad=True. Gradients will be None"]
