"""nn.utils' reparametrizations against torch: parametrize (properties, chains, right_inverse, removal, caching),
parametrizations.weight_norm/spectral_norm, the hook-based weight_norm/spectral_norm, pruning and
stateless.functional_call: state_dict keys, values and gradients with torch's tensors loaded."""

import warnings

import numpy as np
import pytest

import numbagrad
from numbagrad import nn
from numbagrad.nn.utils import parametrize, prune


def _load(ours, theirs):
    ours.load_state_dict({k: numbagrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})


def _linear_pair(torch, *shape):
    theirs = torch.nn.Linear(*shape, dtype=torch.float64)
    ours = nn.Linear(*shape, dtype=numbagrad.float64)
    _load(ours, theirs)
    return ours, theirs


class Symmetric(nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(-1, -2)


class Double(nn.Module):
    def forward(self, x):
        return 2 * x

    def right_inverse(self, x):
        return x / 2


def test_register_parametrization_makes_a_property_and_a_parametrized_class():
    layer = nn.Linear(3, 3)
    parametrize.register_parametrization(layer, "weight", Symmetric())
    assert type(layer).__name__ == "ParametrizedLinear" and parametrize.is_parametrized(layer, "weight")
    w = layer.weight.detach().numpy()
    np.testing.assert_array_equal(w, w.T)
    assert list(layer.state_dict()) == ["bias", "parametrizations.weight.original"]
    layer(numbagrad.randn(2, 3)).sum().backward()
    assert layer.parametrizations.weight.original.grad is not None
    assert parametrize.type_before_parametrizations(layer) is nn.Linear


def test_assignment_goes_through_right_inverse_and_chains_apply_in_order():
    layer = nn.Linear(2, 2)
    parametrize.register_parametrization(layer, "weight", Double())
    layer.weight = numbagrad.ones(2, 2)
    np.testing.assert_allclose(layer.parametrizations.weight.original.detach().numpy(), np.full((2, 2), 0.5))
    parametrize.register_parametrization(layer, "weight", Double())
    np.testing.assert_allclose(layer.weight.detach().numpy(), np.full((2, 2), 2.0))


def test_remove_parametrizations_leaves_the_value_or_the_original():
    layer = nn.Linear(2, 2)
    parametrize.register_parametrization(layer, "weight", Double())
    value = layer.weight.detach().numpy()
    parametrize.remove_parametrizations(layer, "weight")
    assert type(layer) is nn.Linear and isinstance(layer.weight, nn.Parameter)
    np.testing.assert_allclose(layer.weight.detach().numpy(), value)
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        parametrize.remove_parametrizations(layer, "weight")


def test_cached_computes_each_parametrized_tensor_once():
    calls = []

    class Counting(nn.Module):
        def forward(self, x):
            calls.append(1)
            return x

    layer = nn.Linear(2, 2)
    parametrize.register_parametrization(layer, "weight", Counting())
    calls.clear()
    with parametrize.cached():
        layer.weight, layer.weight  # noqa: B018
    assert len(calls) == 1


@pytest.mark.torch
@pytest.mark.parametrize("dim", [0, 1, None])
def test_parametrizations_weight_norm_matches_torch(dim, torch):
    ours, theirs = _linear_pair(torch, 4, 3)
    nn.utils.parametrizations.weight_norm(ours, dim=dim)
    torch.nn.utils.parametrizations.weight_norm(theirs, dim=dim)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key].numpy(), value.numpy(), rtol=1e-12, err_msg=key)
    x = np.random.default_rng(0).standard_normal((5, 4))
    ours(numbagrad.tensor(x)).square().sum().backward()
    theirs(torch.tensor(x)).square().sum().backward()
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, err_msg=name)


@pytest.mark.torch
@pytest.mark.parametrize("hooks", [False, True])
def test_spectral_norm_matches_torch_in_training_and_eval(hooks, torch):
    ours, theirs = _linear_pair(torch, 5, 3)
    if hooks:
        nn.utils.spectral_norm(ours, n_power_iterations=2)
        torch.nn.utils.spectral_norm(theirs, n_power_iterations=2)
    else:
        nn.utils.parametrizations.spectral_norm(ours, n_power_iterations=2)
        torch.nn.utils.parametrizations.spectral_norm(theirs, n_power_iterations=2)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _load(ours, theirs)  # the power-iteration vectors start from torch's draws
    x = np.random.default_rng(0).standard_normal((2, 5))
    for mode in ("train", "train", "eval"):
        getattr(ours, mode)(), getattr(theirs, mode)()
        np.testing.assert_allclose(ours(numbagrad.tensor(x)).detach().numpy(),
                                   theirs(torch.tensor(x)).detach().numpy(), rtol=1e-10)  # fmt: skip
    if not hooks:  # 15 power iterations at registration: the estimate has converged to the largest singular value
        np.testing.assert_allclose(np.linalg.svd(ours.weight.detach().numpy(), compute_uv=False)[0], 1.0, rtol=1e-3)


@pytest.mark.torch
def test_hook_weight_norm_matches_torch_and_warns(torch):
    ours, theirs = _linear_pair(torch, 3, 2)
    with pytest.warns(FutureWarning, match="is deprecated in favor of"):
        nn.utils.weight_norm(ours)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.nn.utils.weight_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x = np.random.default_rng(0).standard_normal((4, 3))
    ours(numbagrad.tensor(x)).sum().backward()
    theirs(torch.tensor(x)).sum().backward()
    np.testing.assert_allclose(ours.weight_g.grad.numpy(), theirs.weight_g.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(ours.weight_v.grad.numpy(), theirs.weight_v.grad.numpy(), rtol=1e-10)
    nn.utils.remove_weight_norm(ours)
    torch.nn.utils.remove_weight_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-12)


@pytest.mark.torch
@pytest.mark.parametrize(
    "prune_call",
    [
        lambda m, layer: m.nn.utils.prune.l1_unstructured(layer, "weight", amount=0.3),
        lambda m, layer: m.nn.utils.prune.l1_unstructured(layer, "weight", amount=4),
        lambda m, layer: m.nn.utils.prune.ln_structured(layer, "weight", amount=1, n=2, dim=0),
        lambda m, layer: m.nn.utils.prune.ln_structured(layer, "weight", amount=0.5, n=1, dim=1),
        lambda m, layer: m.nn.utils.prune.identity(layer, "bias"),
    ],
)
def test_deterministic_pruning_matches_torch(prune_call, torch):
    pytest.importorskip("torch.nn.utils.prune")
    ours, theirs = _linear_pair(torch, 4, 3)
    prune_call(numbagrad, ours)
    prune_call(torch, theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for key, value in theirs.state_dict().items():
        np.testing.assert_array_equal(ours.state_dict()[key].numpy(), value.numpy(), err_msg=key)
    x = np.random.default_rng(0).standard_normal((2, 4))
    ours(numbagrad.tensor(x)).sum().backward()
    theirs(torch.tensor(x)).sum().backward()
    np.testing.assert_allclose(ours.weight_orig.grad.numpy() if hasattr(ours, "weight_orig") else 0,
                               theirs.weight_orig.grad.numpy() if hasattr(theirs, "weight_orig") else 0)  # fmt: skip
    assert prune.is_pruned(ours)


@pytest.mark.torch
def test_iterative_and_global_pruning_match_torch(torch):
    pytest.importorskip("torch.nn.utils.prune")
    ours, theirs = _linear_pair(torch, 6, 4)
    for lib, layer in ((numbagrad, ours), (torch, theirs)):
        lib.nn.utils.prune.l1_unstructured(layer, "weight", amount=0.25)
        lib.nn.utils.prune.l1_unstructured(layer, "weight", amount=0.5)
    np.testing.assert_array_equal(ours.weight_mask.numpy(), theirs.weight_mask.numpy())
    ours2, theirs2 = _linear_pair(torch, 3, 5)
    for lib, a, b in ((numbagrad, ours, ours2), (torch, theirs, theirs2)):
        lib.nn.utils.prune.global_unstructured(
            [(a, "bias"), (b, "weight")], pruning_method=lib.nn.utils.prune.L1Unstructured, amount=6
        )
    np.testing.assert_array_equal(ours2.weight_mask.numpy(), theirs2.weight_mask.numpy())
    np.testing.assert_array_equal(ours.bias_mask.numpy(), theirs.bias_mask.numpy())
    prune.remove(ours, "weight")
    torch.nn.utils.prune.remove(theirs, "weight")
    assert list(ours.state_dict()) == list(theirs.state_dict())
    np.testing.assert_array_equal(ours.weight.detach().numpy(), theirs.weight.detach().numpy())


def test_random_pruning_zeroes_the_asked_count():
    layer = nn.Linear(5, 4)
    prune.random_unstructured(layer, "weight", amount=0.5)
    assert int((layer.weight_mask == 0).sum()) == 10
    prune.random_structured(layer, "bias", amount=2, dim=0)
    assert int((layer.bias_mask == 0).sum()) == 2


@pytest.mark.torch
@pytest.mark.parametrize("amount", [-1, 1.5, "x", 7])
def test_pruning_amount_errors_match_torch(amount, torch):
    pytest.importorskip("torch.nn.utils.prune")
    with pytest.raises((ValueError, TypeError)) as theirs:
        torch.nn.utils.prune.l1_unstructured(torch.nn.Linear(2, 2), "weight", amount=amount)
    with pytest.raises(type(theirs.value)) as ours:
        prune.l1_unstructured(nn.Linear(2, 2), "weight", amount=amount)
    assert str(ours.value) == str(theirs.value)


def test_stateless_functional_call_is_funcs_with_a_warning():
    layer = nn.Linear(2, 1)
    w, b = numbagrad.ones(1, 2), numbagrad.zeros(1)
    with pytest.warns(FutureWarning, match="Please use torch.func.functional_call"):
        out = nn.utils.stateless.functional_call(layer, {"weight": w, "bias": b}, (numbagrad.ones(1, 2),))
    assert out.item() == 2.0
