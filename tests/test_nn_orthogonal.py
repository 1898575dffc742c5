"""``nn.utils.parametrizations.orthogonal`` against torch: from the same initial weight the same originals and
bases (state_dict both ways), the same weight, outputs and gradients for every map with and without
trivialization, assignment through ``right_inverse``, and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad import nn
from numbagrad.nn.utils.parametrizations import orthogonal

MAPS = ["matrix_exp", "cayley", "householder", None]
SHAPES = [(4, 4), (5, 3), (3, 5)]


def _state(lib, module):
    return {k: lib.tensor(v.detach().numpy()) for k, v in module.state_dict().items()}


def _pair(torch, shape, seed: int = 0):
    theirs = torch.nn.Linear(shape[1], shape[0], dtype=torch.float64)
    ours = nn.Linear(shape[1], shape[0], dtype=numbagrad.float64)
    w = np.random.default_rng(seed).standard_normal(shape)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(w))
    ours.load_state_dict(_state(numbagrad, theirs))
    return ours, theirs


def _outputs_and_grads(lib, module, x):
    y = module(lib.tensor(x))
    y.square().sum().backward()
    return y.detach().numpy(), module.parametrizations.weight.original.grad.numpy(), module.bias.grad.numpy()


def _assert_same_module(torch, ours, theirs, n_in: int):
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x = np.random.default_rng(1).standard_normal((2, n_in))
    for a, b in zip(_outputs_and_grads(numbagrad, ours, x), _outputs_and_grads(torch, theirs, x)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("trivialize", [True, False])
@pytest.mark.parametrize("orthogonal_map", MAPS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_orthogonal_matches_torch_with_its_state_dict_loaded(torch, shape, orthogonal_map, trivialize):
    ours, theirs = _pair(torch, shape)
    torch.nn.utils.parametrizations.orthogonal(theirs, orthogonal_map=orthogonal_map, use_trivialization=trivialize)
    orthogonal(ours, orthogonal_map=orthogonal_map, use_trivialization=trivialize)
    ours.load_state_dict(_state(numbagrad, theirs))
    _assert_same_module(torch, ours, theirs, shape[1])


@pytest.mark.parametrize(
    "shape,orthogonal_map,trivialize",
    [((4, 4), "matrix_exp", True), ((4, 4), "cayley", True), ((5, 3), "householder", False),
     ((3, 5), "householder", False), ((4, 4), "householder", True)],
    ids=str,
)  # fmt: skip
def test_orthogonal_initializes_as_torch_from_the_same_weight(torch, shape, orthogonal_map, trivialize):
    """Where torch's initialization draws nothing, ours gives the same originals, which torch then loads."""
    ours, theirs = _pair(torch, shape, seed=2)
    torch.nn.utils.parametrizations.orthogonal(theirs, orthogonal_map=orthogonal_map, use_trivialization=trivialize)
    orthogonal(ours, orthogonal_map=orthogonal_map, use_trivialization=trivialize)
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key].numpy(), value.numpy(), rtol=1e-10, atol=1e-12)
    theirs.load_state_dict(_state(torch, ours))
    _assert_same_module(torch, ours, theirs, shape[1])


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_orthogonal_weight_is_orthogonal_and_batches(shape):
    layer = orthogonal(nn.Linear(shape[1], shape[0], dtype=numbagrad.float64))
    w = layer.weight.detach().numpy()
    gram = w.T @ w if shape[0] >= shape[1] else w @ w.T
    np.testing.assert_allclose(gram, np.eye(min(shape)), atol=1e-12)
    holder = nn.Module()
    holder.register_parameter("weight", nn.Parameter(numbagrad.randn(2, *shape, dtype=numbagrad.float64)))
    batched = orthogonal(holder, orthogonal_map="cayley").weight.detach().numpy()
    assert batched.shape == (2, *shape)


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
def test_assigning_an_orthogonal_matrix_sets_the_weight_like_torch(torch, orthogonal_map):
    ours, theirs = _pair(torch, (4, 4))
    torch.nn.utils.parametrizations.orthogonal(theirs, orthogonal_map=orthogonal_map)
    orthogonal(ours, orthogonal_map=orthogonal_map)
    q = np.linalg.qr(np.random.default_rng(3).standard_normal((4, 4)))[0]
    theirs.weight = torch.tensor(q)
    ours.weight = numbagrad.tensor(q)
    np.testing.assert_allclose(ours.weight.detach().numpy(), q, atol=1e-12)
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key].numpy(), value.numpy(), atol=1e-12)


def test_householder_without_trivialization_assigns_the_reflectors_like_torch(torch):
    ours, theirs = _pair(torch, (5, 3))
    torch.nn.utils.parametrizations.orthogonal(theirs, "weight", "householder", use_trivialization=False)
    orthogonal(ours, "weight", "householder", use_trivialization=False)
    q = np.linalg.qr(np.random.default_rng(4).standard_normal((5, 3)))[0]
    theirs.weight = torch.tensor(q)
    ours.weight = numbagrad.tensor(q)
    np.testing.assert_allclose(ours.parametrizations.weight.original.detach().numpy(),
                               theirs.parametrizations.weight.original.detach().numpy(), atol=1e-12)  # fmt: skip


@pytest.mark.parametrize(
    "make,kw,value",
    [
        (lambda lib: lib.nn.Linear(3, 3), {"orthogonal_map": "qr"}, None),
        (lambda lib: lib.nn.Linear(3, 3), {"name": "bias"}, None),
        (lambda lib: lib.nn.Linear(3, 3), {"name": "nothing"}, None),
        (lambda lib: lib.nn.Linear(3, 3), {"use_trivialization": False}, np.eye(3)),
        (lambda lib: lib.nn.Linear(3, 3), {}, np.eye(2)),
    ],
)
def test_orthogonal_errors_match_torch(torch, make, kw, value):
    def run(lib, fn):
        module = fn(make(lib), **kw)
        if value is not None:
            module.weight = lib.tensor(value, dtype=lib.float32)

    with pytest.raises(Exception) as theirs:
        run(torch, torch.nn.utils.parametrizations.orthogonal)
    with pytest.raises(type(theirs.value)) as ours:
        run(numbagrad, orthogonal)
    expected = str(theirs.value).replace("torch.Size", "numbagrad.Size")
    assert str(ours.value) == expected
