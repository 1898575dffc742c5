"""Lazy modules: placeholders until the first input, then the concrete layer with torch's shapes, class, repr and
initialisation; a state_dict loaded before the first forward materializes them."""

import numpy as np
import pytest

import numbagrad
from numbagrad import nn

LAZY = [
    ("LazyLinear", (3,), (2, 5), "Linear"),
    ("LazyLinear", (3, False), (4, 2, 5), "Linear"),
    ("LazyBatchNorm1d", (), (4, 3), "BatchNorm1d"),
    ("LazyBatchNorm2d", (), (2, 3, 4, 4), "BatchNorm2d"),
    ("LazyBatchNorm3d", (1e-3, None), (2, 3, 2, 2, 2), "BatchNorm3d"),
    ("LazyConv1d", (4, 3), (2, 3, 7), "Conv1d"),
    ("LazyConv2d", (4, 3, 2, 1), (2, 3, 6, 6), "Conv2d"),
    ("LazyConv3d", (2, 2), (1, 2, 4, 4, 4), "Conv3d"),
    ("LazyConvTranspose1d", (4, 3, 1, 0, 0, 2), (2, 6, 5), "ConvTranspose1d"),
    ("LazyConvTranspose2d", (3, 2, 2), (2, 4, 3, 3), "ConvTranspose2d"),
    ("LazyConvTranspose3d", (2, 2), (1, 2, 3, 3, 3), "ConvTranspose3d"),
    ("LazyInstanceNorm1d", (), (2, 3, 5), "InstanceNorm1d"),
    ("LazyInstanceNorm2d", (), (2, 3, 4, 4), "InstanceNorm2d"),
    ("LazyInstanceNorm3d", (), (2, 3, 2, 2, 2), "InstanceNorm3d"),
]


@pytest.mark.torch
@pytest.mark.parametrize("name, args, shape, becomes", LAZY, ids=[f"{n}{a}" for n, a, _, _ in LAZY])
def test_lazy_module_becomes_torchs_layer(name, args, shape, becomes, torch):
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(ours) == repr(theirs)
    assert [repr(p) for p in ours.parameters()] == [repr(p) for p in theirs.parameters()]
    data = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out_ours, out_theirs = ours(numbagrad.tensor(data)), theirs(torch.tensor(data))
    assert type(ours).__name__ == type(theirs).__name__ == becomes
    assert repr(ours) == repr(theirs)
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {
        k: tuple(v.shape) for k, v in theirs.state_dict().items()
    }
    assert tuple(out_ours.shape) == tuple(out_theirs.shape)
    ours.load_state_dict({k: numbagrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    np.testing.assert_allclose(ours(numbagrad.tensor(data)).detach().numpy(),
                               theirs(torch.tensor(data)).detach().numpy(), rtol=1e-5, atol=1e-6)  # fmt: skip


def test_lazy_linear_initialises_as_linear_once_the_size_is_known():
    numbagrad.manual_seed(0)
    lazy = nn.LazyLinear(4)
    lazy(numbagrad.ones(1, 100))
    bound = 1 / np.sqrt(100)
    assert np.abs(lazy.weight.detach().numpy()).max() <= bound and lazy.weight.detach().numpy().std() > bound / 4
    assert isinstance(lazy.weight, nn.Parameter) and not isinstance(lazy.weight, nn.UninitializedParameter)
    assert lazy.weight.requires_grad


def test_a_state_dict_loaded_before_the_first_forward_materializes_the_placeholders():
    source = nn.Linear(5, 3)
    lazy = nn.LazyLinear(3)
    lazy.load_state_dict(source.state_dict())
    np.testing.assert_array_equal(lazy.weight.detach().numpy(), source.weight.detach().numpy())
    x = numbagrad.randn(2, 5)
    np.testing.assert_array_equal(lazy(x).detach().numpy(), source(x).detach().numpy())
    assert type(lazy) is nn.Linear


def test_lazy_layers_train_inside_a_model():
    model = nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.LazyLinear(1))
    model(numbagrad.randn(4, 6))
    opt = numbagrad.optim.SGD(model.parameters(), lr=0.1)
    loss = model(numbagrad.randn(4, 6)).square().mean()
    loss.backward()
    opt.step()
    assert [tuple(p.shape) for p in model.parameters()] == [(8, 6), (8,), (1, 8), (1,)]
    assert all(p.grad is not None for p in model.parameters())


def test_uninitialized_parameters_refuse_shape_queries():
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter"):
        nn.LazyLinear(2).weight.shape  # noqa: B018


@pytest.mark.torch
def test_lazy_conv_errors_match_torch(torch):
    for call in (
        lambda m: m.nn.LazyConv2d(4, 3)(m.ones(3, 3)),
        lambda m: m.nn.LazyConv2d(4, 3, groups=2)(m.ones(1, 3, 5, 5)),
    ):
        with pytest.raises((RuntimeError, ValueError)) as theirs:
            call(torch)
        with pytest.raises(type(theirs.value)) as ours:
            call(numbagrad)
        assert str(ours.value) == str(theirs.value).replace("torch.", "numbagrad.")
