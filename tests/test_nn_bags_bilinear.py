"""EmbeddingBag and Bilinear against torch: outputs, node names, weight (and per-sample-weight) gradients with
torch's parameters loaded, gradcheck, reprs and torch's errors."""

import numpy as np
import pytest

import numbagrad
from numbagrad import nn
from numbagrad.autograd import gradcheck
from numbagrad.nn import functional as F
from torch_oracle import raises_like

INDICES = [1, 2, 4, 5, 4, 3, 2, 9, 0, 0, 7]
BAGS = [
    ("2d_mean", dict(mode="mean"), [[1, 2, 4], [5, 4, 3]], None, None),
    ("2d_sum", dict(mode="sum"), [[1, 2, 4], [5, 4, 3]], None, None),
    ("2d_max", dict(mode="max"), [[1, 2, 4], [5, 4, 4]], None, None),
    ("offsets_mean_empty_bag", dict(mode="mean"), INDICES, [0, 4, 4, 8], None),
    ("offsets_sum_weights", dict(mode="sum"), INDICES, [0, 3, 8], "psw"),
    ("offsets_max", dict(mode="max"), INDICES, [0, 2, 6], None),
    ("include_last_offset", dict(mode="sum", include_last_offset=True), INDICES, [0, 3, 8, 11], None),
    ("padding_idx_mean", dict(mode="mean", padding_idx=0), INDICES, [0, 5, 8], None),
    ("padding_idx_max", dict(mode="max", padding_idx=4), INDICES, [0, 5, 8], None),
    ("padding_only_bag", dict(mode="mean", padding_idx=0), [[0, 0], [1, 0]], None, None),
]


def _pair(kwargs, torch):
    theirs = torch.nn.EmbeddingBag(10, 3, dtype=torch.float64, **kwargs)
    ours = nn.EmbeddingBag(10, 3, dtype=numbagrad.float64, **kwargs)
    ours.load_state_dict({"weight": numbagrad.tensor(theirs.weight.detach().numpy())})
    return ours, theirs


@pytest.mark.torch
@pytest.mark.parametrize("name, kwargs, indices, offsets, psw", BAGS, ids=[b[0] for b in BAGS])
def test_embedding_bag_matches_torch(name, kwargs, indices, offsets, psw, torch):
    ours, theirs = _pair(kwargs, torch)
    assert repr(ours) == repr(theirs)
    args_ours, args_theirs = [numbagrad.tensor(indices)], [torch.tensor(indices)]
    if offsets is not None:
        args_ours.append(numbagrad.tensor(offsets))
        args_theirs.append(torch.tensor(offsets))
    weights_ours = weights_theirs = None
    if psw:
        w = np.random.default_rng(0).uniform(0.5, 2, len(indices))
        weights_ours = numbagrad.tensor(w, requires_grad=True)
        weights_theirs = torch.tensor(w, requires_grad=True)
    out_ours = ours(*args_ours, per_sample_weights=weights_ours)
    out_theirs = theirs(*args_theirs, per_sample_weights=weights_theirs)
    np.testing.assert_allclose(out_ours.detach().numpy(), out_theirs.detach().numpy(), rtol=1e-12)
    assert out_ours.grad_fn.name() == type(out_theirs.grad_fn).__name__
    g = np.random.default_rng(1).standard_normal(tuple(out_theirs.shape))
    (out_ours * numbagrad.tensor(g)).sum().backward()
    (out_theirs * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-12, atol=1e-14)
    if psw:
        np.testing.assert_allclose(weights_ours.grad.numpy(), weights_theirs.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_gradcheck(mode):
    weight = numbagrad.tensor(np.random.default_rng(2).standard_normal((6, 2)), requires_grad=True)
    psw = numbagrad.tensor([0.5, 2.0, 1.0, 1.5, 3.0], dtype=numbagrad.float64, requires_grad=True)
    indices, offsets = numbagrad.tensor([1, 2, 1, 5, 0]), numbagrad.tensor([0, 2])
    if mode == "sum":
        assert gradcheck(
            lambda w, p: F.embedding_bag(indices, w, offsets, mode="sum", per_sample_weights=p), (weight, psw)
        )
    else:
        assert gradcheck(lambda w: F.embedding_bag(indices, w, offsets, mode="mean"), (weight,))


EMBEDDING_BAG_ERRORS = [
    lambda m: m.nn.functional.embedding_bag(m.tensor([[1, 2]]), m.ones(4, 2), m.tensor([0])),
    lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), m.ones(4, 2)),
    lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), m.ones(4, 2), m.tensor([1])),
    lambda m: m.nn.functional.embedding_bag(m.tensor([1, 2]), m.ones(4, 2), m.tensor([0]), mode="median"),
    lambda m: m.nn.functional.embedding_bag(
        m.tensor([1, 2]), m.ones(4, 2), m.tensor([0]), mode="mean", per_sample_weights=m.ones(2)
    ),
    lambda m: m.nn.functional.embedding_bag(m.tensor([1, 7]), m.ones(4, 2), m.tensor([0])),
]


@pytest.mark.torch
@pytest.mark.parametrize("call", EMBEDDING_BAG_ERRORS)
def test_embedding_bag_errors_match_torch(call, torch):
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)) as ours:
        call(numbagrad)
    assert str(ours.value) == str(theirs.value).replace("torch.", "numbagrad.")


@pytest.mark.torch
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("lead", [(4,), (2, 3), ()])
def test_bilinear_matches_torch(bias, lead, torch):
    theirs = torch.nn.Bilinear(3, 2, 5, bias=bias, dtype=torch.float64)
    ours = nn.Bilinear(3, 2, 5, bias=bias, dtype=numbagrad.float64)
    assert repr(ours) == repr(theirs)
    ours.load_state_dict({k: numbagrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((*lead, 3)), rng.standard_normal((*lead, 2))
    xa, xb = numbagrad.tensor(a, requires_grad=True), numbagrad.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    out_ours, out_theirs = ours(xa, xb), theirs(ta, tb)
    np.testing.assert_allclose(out_ours.detach().numpy(), out_theirs.detach().numpy(), rtol=1e-12)
    assert out_ours.grad_fn.name() == type(out_theirs.grad_fn).__name__
    out_ours.square().sum().backward()
    out_theirs.square().sum().backward()
    for x, t in ((xa, ta), (xb, tb), (ours.weight, theirs.weight)):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10)


def test_bilinear_gradcheck():
    rng = np.random.default_rng(4)
    tensors = [numbagrad.tensor(rng.standard_normal(s), requires_grad=True) for s in [(2, 3), (2, 4), (5, 3, 4), (5,)]]
    assert gradcheck(F.bilinear, tuple(tensors))


BILINEAR_ERRORS = [
    lambda m: m.nn.functional.bilinear(m.ones(2, 3), m.ones(3, 4), m.ones(5, 3, 4)),
    lambda m: m.nn.functional.bilinear(m.ones(2, 4), m.ones(2, 4), m.ones(5, 3, 4)),
    lambda m: m.nn.functional.bilinear(m.ones(2, 3), m.ones(2, 2), m.ones(5, 3, 4)),
    lambda m: m.nn.functional.bilinear(m.ones(2, 3), m.ones(2, 4), m.ones(5, 3, 4), m.ones(4)),
    lambda m: m.nn.functional.bilinear(m.ones(2, 3), m.ones(4), m.ones(5, 3, 4)),
]


@pytest.mark.torch
@pytest.mark.parametrize("call", BILINEAR_ERRORS)
def test_bilinear_errors_match_torch(call, torch):
    raises_like(torch, call)


def test_embedding_bag_from_pretrained_matches_torch(torch):
    w = np.random.default_rng(8).standard_normal((5, 3))
    results = []
    for lib in (numbagrad, torch):
        bag = lib.nn.EmbeddingBag.from_pretrained(lib.tensor(w), mode="sum", padding_idx=2)
        out = bag(lib.tensor([[0, 2, 4], [1, 1, 3]]))
        results.append((out.detach().numpy(), bag.weight.requires_grad, repr(bag)))
        with pytest.raises(AssertionError):
            lib.nn.EmbeddingBag.from_pretrained(lib.tensor(w[0]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12)
    assert results[0][1:] == results[1][1:] == (False, "EmbeddingBag(5, 3, mode='sum', padding_idx=2)")
