"""The first nn modules: reprs, parameters and buffers, default initialisation, and forward/backward against
torch with the same weights (BatchNorm's running statistics included). Containers: ParameterList/ParameterDict."""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest

import numbagrad
from numbagrad import nn

pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths:UserWarning")

#: Each entry builds a module from a library (``numbagrad.nn`` or ``torch.nn``) and that library.
MODULES = {
    "ReLU6": lambda nn, lib: nn.ReLU6(),
    "ReLU6_inplace": lambda nn, lib: nn.ReLU6(True),
    "Hardtanh": lambda nn, lib: nn.Hardtanh(-2, 3, True),
    "LeakyReLU": lambda nn, lib: nn.LeakyReLU(0.2),
    "ELU": lambda nn, lib: nn.ELU(0.5, True),
    "SELU": lambda nn, lib: nn.SELU(),
    "GELU": lambda nn, lib: nn.GELU(),
    "GELU_tanh": lambda nn, lib: nn.GELU("tanh"),
    "SiLU": lambda nn, lib: nn.SiLU(True),
    "Mish": lambda nn, lib: nn.Mish(),
    "Softplus": lambda nn, lib: nn.Softplus(2, 10),
    "Hardswish": lambda nn, lib: nn.Hardswish(True),
    "Hardsigmoid": lambda nn, lib: nn.Hardsigmoid(),
    "LogSoftmax": lambda nn, lib: nn.LogSoftmax(1),
    "Softmin": lambda nn, lib: nn.Softmin(1),
    "GLU": lambda nn, lib: nn.GLU(),
    "Dropout": lambda nn, lib: nn.Dropout(0.2, True),
    "LayerNorm": lambda nn, lib: nn.LayerNorm(5),
    "LayerNorm_2d_no_affine": lambda nn, lib: nn.LayerNorm((3, 4), elementwise_affine=False),
    "LayerNorm_no_bias": lambda nn, lib: nn.LayerNorm(4, bias=False),
    "BatchNorm1d": lambda nn, lib: nn.BatchNorm1d(3),
    "BatchNorm2d_cumulative_untracked": lambda nn, lib: nn.BatchNorm2d(
        4, momentum=None, affine=False, track_running_stats=False
    ),
    "GroupNorm": lambda nn, lib: nn.GroupNorm(2, 4),
    "GroupNorm_no_affine": lambda nn, lib: nn.GroupNorm(1, 3, affine=False),
    "Embedding": lambda nn, lib: nn.Embedding(10, 3),
    "Embedding_options": lambda nn, lib: nn.Embedding(
        10, 3, padding_idx=-1, max_norm=1.0, norm_type=1.0, scale_grad_by_freq=True
    ),
    "Conv1d": lambda nn, lib: nn.Conv1d(2, 4, 3),
    "Conv1d_options": lambda nn, lib: nn.Conv1d(2, 4, 3, 2, 1, 2, 2, False),
    "Conv2d": lambda nn, lib: nn.Conv2d(1, 32, 3),
    "Conv2d_options": lambda nn, lib: nn.Conv2d(
        4, 8, (3, 2), stride=2, padding=1, dilation=(2, 1), groups=2, bias=False
    ),  # fmt: skip
    "Conv2d_same": lambda nn, lib: nn.Conv2d(3, 6, 3, padding="same"),
    "MaxPool2d": lambda nn, lib: nn.MaxPool2d(2),
    "MaxPool2d_options": lambda nn, lib: nn.MaxPool2d((2, 3), 1, 1, 2, True, True),
    "AvgPool2d": lambda nn, lib: nn.AvgPool2d(3, 2, 1, True, False, 2),
    "AdaptiveAvgPool2d": lambda nn, lib: nn.AdaptiveAvgPool2d((5, None)),
    "L1Loss": lambda nn, lib: nn.L1Loss(),
    "SmoothL1Loss": lambda nn, lib: nn.SmoothL1Loss(beta=0.5),
    "HuberLoss": lambda nn, lib: nn.HuberLoss(delta=2.0),
    "NLLLoss": lambda nn, lib: nn.NLLLoss(lib.ones(3)),
    "BCELoss": lambda nn, lib: nn.BCELoss(),
    "BCEWithLogitsLoss": lambda nn, lib: nn.BCEWithLogitsLoss(pos_weight=lib.ones(3)),
    "KLDivLoss": lambda nn, lib: nn.KLDivLoss(log_target=True),
    "Flatten": lambda nn, lib: nn.Flatten(0, 2),
    "Unflatten": lambda nn, lib: nn.Unflatten(1, (2, 5)),
    "ParameterList": lambda nn, lib: nn.ParameterList([nn.Parameter(lib.zeros(2, 3)), lib.zeros(3)]),
    "ParameterDict": lambda nn, lib: nn.ParameterDict(
        {"b": nn.Parameter(lib.zeros(2)), "a": lib.zeros(3, 1, dtype=lib.float64)}
    ),
    "Sequential": lambda nn, lib: nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU6(), nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.1)
    ),
}


def _ours(name):
    return MODULES[name](nn, numbagrad)


@pytest.mark.torch
@pytest.mark.parametrize("name", MODULES)
def test_repr_matches_torch(name):
    torch = pytest.importorskip("torch")
    assert repr(_ours(name)).replace("numbagrad.", "torch.") == repr(MODULES[name](torch.nn, torch))


@pytest.mark.torch
@pytest.mark.parametrize("name", MODULES)
def test_state_dict_names_shapes_and_dtypes_match_torch(name):
    torch = pytest.importorskip("torch")
    ours = {k: (tuple(v.shape), v.dtype.name) for k, v in _ours(name).state_dict().items()}
    theirs = {k: (tuple(v.shape), str(v.dtype)[6:]) for k, v in MODULES[name](torch.nn, torch).state_dict().items()}
    assert list(ours) == list(theirs) and ours == theirs


# --- default initialisation --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("module", "fan_in"),
    [(lambda: nn.Conv2d(8, 64, 3), 72), (lambda: nn.Conv1d(6, 50, 5, groups=2), 15), (lambda: nn.Conv2d(1, 400, 2), 4)],
)
def test_conv_weights_and_bias_are_uniform_in_one_over_sqrt_fan_in(module, fan_in):
    """kaiming_uniform_(a=sqrt(5)) bounds the weights by gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in)."""
    m = module()
    bound = 1 / math.sqrt(fan_in)
    w = m.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound  # the standard deviation of U(-b, b)
    b = m.bias.detach().numpy()
    assert np.abs(b).max() <= bound and m.weight.requires_grad and m.bias.requires_grad


def test_normalization_layers_start_at_ones_and_zeros():
    for m in (nn.LayerNorm(6), nn.GroupNorm(2, 6), nn.BatchNorm1d(6), nn.BatchNorm2d(6)):
        np.testing.assert_array_equal(m.weight.detach().numpy(), np.ones(6))
        np.testing.assert_array_equal(m.bias.detach().numpy(), np.zeros(6))
    bn = nn.BatchNorm2d(6)
    np.testing.assert_array_equal(bn.running_mean.numpy(), np.zeros(6))
    np.testing.assert_array_equal(bn.running_var.numpy(), np.ones(6))
    assert bn.num_batches_tracked.dtype is numbagrad.int64 and bn.num_batches_tracked.item() == 0


def test_embedding_is_standard_normal_with_the_padding_row_zero():
    m = nn.Embedding(2000, 8, padding_idx=3)
    w = m.weight.detach().numpy()
    np.testing.assert_array_equal(w[3], np.zeros(8))
    rest = np.delete(w, 3, axis=0)
    assert abs(rest.mean()) < 0.05 and abs(rest.std() - 1) < 0.05


def test_embedding_from_pretrained_is_frozen_by_default():
    weights = numbagrad.tensor([[1.0, 2.0], [3.0, 4.0]])
    m = nn.Embedding.from_pretrained(weights)
    assert not m.weight.requires_grad
    np.testing.assert_array_equal(m(numbagrad.tensor([1, 0])).numpy(), [[3.0, 4.0], [1.0, 2.0]])
    assert nn.Embedding.from_pretrained(weights, freeze=False).weight.requires_grad


# --- forward and backward against torch with the same weights ----------------------------------------------------
#: (module builder, input shape, input domain): run in float64 with torch's weights copied in.
FORWARD = {
    "Conv2d": (lambda nn: nn.Conv2d(3, 5, 3, stride=2, padding=1), (2, 3, 9, 8)),
    "Conv2d_groups_same": (lambda nn: nn.Conv2d(4, 6, (3, 2), padding="same", groups=2), (2, 4, 5, 6)),
    "Conv1d": (lambda nn: nn.Conv1d(3, 4, 3, dilation=2), (2, 3, 10)),
    "LayerNorm": (lambda nn: nn.LayerNorm((4, 5)), (3, 4, 5)),
    "GroupNorm": (lambda nn: nn.GroupNorm(3, 6), (2, 6, 4)),
    "BatchNorm1d": (lambda nn: nn.BatchNorm1d(4), (8, 4)),
    "BatchNorm2d": (lambda nn: nn.BatchNorm2d(3), (4, 3, 5, 5)),
    "MaxPool2d": (lambda nn: nn.MaxPool2d(3, 2, 1, ceil_mode=True), (2, 3, 7, 7)),
    "AvgPool2d": (lambda nn: nn.AvgPool2d(2, count_include_pad=False, padding=1), (2, 3, 7, 7)),
    "AdaptiveAvgPool2d": (lambda nn: nn.AdaptiveAvgPool2d((3, 2)), (2, 3, 7, 5)),
    "Flatten": (lambda nn: nn.Flatten(), (2, 3, 4)),
    "Unflatten": (lambda nn: nn.Unflatten(-1, (2, -1)), (2, 3, 4)),
    "GELU": (lambda nn: nn.GELU("tanh"), (3, 4)),
    "Hardtanh": (lambda nn: nn.Hardtanh(-0.5, 0.7), (3, 4)),
    "LogSoftmax": (lambda nn: nn.LogSoftmax(-1), (3, 4)),
}


def _same_module(name):
    torch = pytest.importorskip("torch")
    build, shape = FORWARD[name]
    theirs = build(torch.nn).double()
    ours = build(nn).double()
    ours.load_state_dict({k: numbagrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(0).standard_normal(shape)
    return ours, theirs, x, torch


@pytest.mark.torch
@pytest.mark.parametrize("name", FORWARD)
def test_forward_and_backward_match_torch_with_the_same_weights(name):
    ours, theirs, x, torch = _same_module(name)
    a = numbagrad.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    ya, yb = ours(a), theirs(b)
    np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = np.random.default_rng(1).standard_normal(tuple(yb.shape))
    ya.backward(numbagrad.tensor(g))
    yb.backward(torch.tensor(g))
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)
    for (n, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=n)


@pytest.mark.torch
@pytest.mark.parametrize("momentum", [0.1, 0.5, None])
def test_batchnorm_running_statistics_follow_torch_through_training_and_eval(momentum):
    torch = pytest.importorskip("torch")
    ours, theirs = nn.BatchNorm2d(3, momentum=momentum).double(), torch.nn.BatchNorm2d(3, momentum=momentum).double()
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.standard_normal((4, 3, 2, 5)) * 3 + 1
        ours(numbagrad.tensor(x))
        theirs(torch.tensor(x))
    for key in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(getattr(ours, key).numpy(), getattr(theirs, key).numpy(), rtol=1e-12)
    ours.eval()
    theirs.eval()
    x = rng.standard_normal((2, 3, 2, 5))
    np.testing.assert_allclose(ours(numbagrad.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-12)  # fmt: skip
    assert ours.num_batches_tracked.item() == 3


def test_batchnorm_without_running_stats_normalizes_by_the_batch_in_eval_too():
    m = nn.BatchNorm1d(2, affine=False, track_running_stats=False).eval()
    out = m(numbagrad.tensor([[1.0, 10.0], [3.0, 20.0]]))
    np.testing.assert_allclose(out.numpy(), [[-1.0, -1.0], [1.0, 1.0]], rtol=1e-4)


def test_batchnorm_checks_input_dims_and_batch_size():
    with pytest.raises(ValueError, match=r"expected 4D input \(got 2D input\)"):
        nn.BatchNorm2d(3)(numbagrad.zeros(2, 3))
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        nn.BatchNorm1d(3)(numbagrad.zeros(2, 3, 1, 1))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        nn.BatchNorm1d(3)(numbagrad.zeros(1, 3))


def test_dropout_module_is_the_identity_in_eval_and_drops_in_training():
    m = nn.Dropout(0.5)
    x = numbagrad.ones(10000)
    out = m(x).numpy()
    assert set(np.unique(out)) == {0.0, 2.0} and abs((out == 0).mean() - 0.5) < 0.03
    assert m.eval()(x) is x


# --- containers --------------------------------------------------------------------------------------------------
def test_parameter_list_registers_and_wraps_tensors():
    pl = nn.ParameterList([numbagrad.zeros(2), nn.Parameter(numbagrad.ones(3))])
    pl.append(numbagrad.zeros(4, requires_grad=False))
    assert len(pl) == 3 and all(isinstance(p, nn.Parameter) for p in pl)
    assert [n for n, _ in pl.named_parameters()] == ["0", "1", "2"]
    assert pl[-1].shape == (4,) and len(pl[1:]) == 2
    pl[0] = numbagrad.ones(5)
    assert isinstance(pl[0], nn.Parameter) and pl[0].shape == (5,)
    with pytest.raises(IndexError, match="index 3 is out of range"):
        pl[3]
    with pytest.raises(RuntimeError, match="ParameterList should not be called."):
        pl()
    with pytest.raises(TypeError, match="ParameterList.extend should be called with an iterable, but got Tensor"):
        pl.extend(numbagrad.zeros(2))


def test_parameter_list_in_a_module_is_trained_by_an_optimizer():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.ws = nn.ParameterList([numbagrad.ones(2) for _ in range(3)])

    model = Model()
    assert len(list(model.parameters())) == 3
    sum((w * w).sum() for w in model.ws).backward()
    numbagrad.optim.SGD(model.parameters(), lr=0.25).step()
    np.testing.assert_allclose(model.ws[2].detach().numpy(), [0.5, 0.5])


def test_parameter_dict_orders_keys_as_torch_does():
    pd = nn.ParameterDict({"b": numbagrad.zeros(1), "a": numbagrad.zeros(2)})  # a plain dict: sorted
    assert list(pd) == ["a", "b"]
    pd.update(OrderedDict([("z", numbagrad.zeros(1)), ("c", numbagrad.zeros(1))]))  # ordered: kept
    assert list(pd.keys()) == ["a", "b", "z", "c"]
    assert isinstance(pd["z"], nn.Parameter) and "c" in pd and len(pd) == 4
    assert pd.pop("b").shape == (1,) and "b" not in pd
    assert [n for n, _ in pd.named_parameters()] == ["a", "z", "c"]
    assert pd.get("nope", 7) == 7
    with pytest.raises(TypeError, match="Index given to ParameterDict cannot be used as a key"):
        pd[1]
    with pytest.raises(ValueError, match="ParameterDict update sequence element #0 has length 3; 2 is required"):
        pd.update([("a", 1, 2)])


def test_flatten_and_unflatten_round_trip_with_an_inferred_size():
    x = numbagrad.arange(24.0).reshape(2, 3, 4)
    flat = nn.Flatten()(x)
    assert flat.shape == (2, 12)
    back = nn.Unflatten(1, (3, -1))(flat)
    assert back.shape == (2, 3, 4) and np.array_equal(back.numpy(), x.numpy())
    with pytest.raises(RuntimeError, match="don't multiply up to the size of dim 1"):
        nn.Unflatten(1, (5, 2))(flat)
    with pytest.raises(TypeError, match="unflattened_size must be tuple of ints"):
        nn.Unflatten(1, 12)


# --- loss modules ------------------------------------------------------------------------------------------------
def test_loss_modules_pass_their_options_to_the_functional_form():
    from numbagrad.nn import functional as F

    x = numbagrad.tensor([[0.2, -1.0, 3.0], [1.5, 0.5, -0.5]])
    t = numbagrad.tensor([[0.0, -1.5, 1.0], [1.0, 1.0, 0.0]])
    cases = [
        (nn.L1Loss(reduction="sum"), F.l1_loss(x, t, reduction="sum")),
        (nn.SmoothL1Loss(beta=0.3), F.smooth_l1_loss(x, t, beta=0.3)),
        (nn.HuberLoss(delta=0.4), F.huber_loss(x, t, delta=0.4)),
        (nn.KLDivLoss(reduction="batchmean", log_target=True), F.kl_div(x, t, reduction="batchmean", log_target=True)),
        (nn.BCEWithLogitsLoss(pos_weight=numbagrad.tensor([1.0, 2.0, 3.0])),
         F.binary_cross_entropy_with_logits(x, t.abs().clamp(max=1.0), pos_weight=numbagrad.tensor([1.0, 2.0, 3.0]))),
    ]  # fmt: skip
    for module, expected in cases:
        target = t.abs().clamp(max=1.0) if isinstance(module, nn.BCEWithLogitsLoss) else t
        np.testing.assert_allclose(module(x, target).numpy(), expected.numpy())
    probs = x.sigmoid()
    np.testing.assert_allclose(nn.BCELoss(weight=numbagrad.tensor([1.0, 0.0, 2.0]))(probs, t.abs().clamp(max=1.0))
                               .numpy(), F.binary_cross_entropy(probs, t.abs().clamp(max=1.0),
                               numbagrad.tensor([1.0, 0.0, 2.0])).numpy())  # fmt: skip


def test_legacy_size_average_and_reduce_map_to_a_reduction_with_a_warning():
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated, please use reduction='sum'"):
        m = nn.L1Loss(size_average=False)
    assert m.reduction == "sum"
    with pytest.warns(UserWarning):
        assert nn.NLLLoss(reduce=False).reduction == "none"


def test_loss_weights_are_buffers_moved_with_the_module():
    m = nn.BCEWithLogitsLoss(weight=numbagrad.ones(3), pos_weight=numbagrad.ones(3))
    assert sorted(n for n, _ in m.named_buffers()) == ["pos_weight", "weight"]
    assert m.double().pos_weight.dtype is numbagrad.float64


def test_conv_module_validates_its_arguments_like_torch():
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 6, 3, groups=2)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided convolutions"):
        nn.Conv2d(3, 6, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        nn.Conv1d(3, 6, 3, padding="full")


@pytest.mark.torch
def test_a_small_cnn_trains_step_for_step_like_torch():
    """Conv2d, BatchNorm2d, ReLU6, MaxPool2d, Dropout(eval-free p=0), Flatten, Linear, GELU, LayerNorm and a
    label-smoothed cross entropy: three SGD steps from the same weights give the same losses and weights."""
    torch = pytest.importorskip("torch")

    def build(nn):
        return nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU6(), nn.MaxPool2d(2), nn.Dropout(0.0),
            nn.Flatten(), nn.Linear(4 * 3 * 3, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 5),
        )  # fmt: skip

    theirs = build(torch.nn).double()
    ours = build(nn).double()
    ours.load_state_dict({k: numbagrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    opt_ours = numbagrad.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    opt_theirs = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x, y = rng.standard_normal((6, 1, 6, 6)), rng.integers(0, 5, 6)
        losses = []
        for model, opt, lib in ((ours, opt_ours, numbagrad), (theirs, opt_theirs, torch)):
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(model(lib.tensor(x)), lib.tensor(y), label_smoothing=0.1)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[0] == pytest.approx(losses[1], rel=1e-10)
    for (name, p), q in zip(ours.state_dict().items(), theirs.state_dict().values()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)
