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


def _tail_runs(lib, early_stop: bool, use_context_manager: bool) -> int:
    """How many times the code after a segment's last saved tensor runs: once in forward, and again in the
    recomputation unless it stops early."""
    ck = numbagrad.utils.checkpoint if lib is numbagrad else __import__("torch.utils.checkpoint").utils.checkpoint
    log = []

    def segment(x):
        y = x.sin()  # saves x: the segment's only saved tensor
        log.append("tail")
        return y * 2  # (saves nothing)

    x = lib.tensor([0.5, 1.0], requires_grad=True)
    if use_context_manager:
        with ck.set_checkpoint_early_stop(early_stop):
            y = ck.checkpoint(segment, x, use_reentrant=False)
    else:
        y = ck.checkpoint(segment, x, use_reentrant=False, early_stop=early_stop)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.cos([0.5, 1.0]), rtol=1e-6)
    return len(log)


@pytest.mark.parametrize("use_context_manager", [False, True])
@pytest.mark.parametrize("early_stop", [True, False])
def test_recomputation_stops_once_every_saved_tensor_is_back(torch, early_stop, use_context_manager):
    runs = [_tail_runs(lib, early_stop, use_context_manager) for lib in (numbagrad, torch)]
    assert runs[0] == runs[1] == (1 if early_stop else 2)


def _shape_changing_segment():
    calls = [0]

    def segment(x):
        calls[0] += 1
        return x[: 2 if calls[0] == 1 else 1].exp().sum()

    return segment


@pytest.mark.parametrize("determinism_check", ["default", "none"])
def test_determinism_check_compares_recomputed_metadata_as_torch(torch, determinism_check):
    outcomes = []
    for lib in (numbagrad, torch):
        ck = numbagrad.utils.checkpoint if lib is numbagrad else __import__("torch.utils.checkpoint").utils.checkpoint
        x = lib.tensor([0.5, 1.0, 2.0], requires_grad=True)
        y = ck.checkpoint(_shape_changing_segment(), x, use_reentrant=False, determinism_check=determinism_check)
        try:
            y.backward()
            outcomes.append(x.grad.tolist())
        except RuntimeError as error:
            outcomes.append((type(error).__name__, str(error).split("\n")[0]))
    assert outcomes[0] == outcomes[1]


def test_unknown_determinism_check_is_refused(torch):
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    messages = []
    for lib, ck in ((numbagrad, checkpoint), (torch, torch_checkpoint)):
        with pytest.raises(ValueError) as info:
            ck(lambda t: t * 2, lib.ones(2, requires_grad=True), use_reentrant=False, determinism_check="exact")
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_context_fn_wraps_forward_and_recomputation():
    import contextlib

    entered = []

    @contextlib.contextmanager
    def mark(name):
        entered.append(name)
        yield

    x = numbagrad.tensor([0.5, 1.0], requires_grad=True)
    y = checkpoint(lambda t: t.exp().sum(), x, use_reentrant=False, context_fn=lambda: (mark("fwd"), mark("re")))
    assert entered == ["fwd"]
    y.backward()
    assert entered == ["fwd", "re"]


def test_debug_errors_list_the_ops_of_both_runs():
    from numbagrad.utils.checkpoint import CheckpointError

    x = numbagrad.tensor([0.5, 1.0, 2.0], requires_grad=True)
    y = checkpoint(_shape_changing_segment(), x, use_reentrant=False, debug=True)
    with pytest.raises(CheckpointError) as info:
        y.backward()
    message = str(info.value)
    assert "Operations executed during the original forward:" in message and "aten::exp" in message


@pytest.mark.parametrize("option", [{"debug": True}, {"context_fn": lambda: (None, None)}])
def test_reentrant_checkpoint_refuses_context_fn_and_debug(torch, option):
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    messages = []
    for lib, ck in ((numbagrad, checkpoint), (torch, torch_checkpoint)):
        with pytest.raises(ValueError) as info:
            ck(lambda t: t * 2, lib.ones(2, requires_grad=True), use_reentrant=True, **option)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
