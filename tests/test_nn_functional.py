"""nn.functional against torch: values, dtypes, gradients and printed node names, plus gradcheck in float64.

Each case is one call written once for both libraries (``fn(lib, F, *tensors)``), with its tensor inputs drawn
from specs: ``R`` a float tensor that requires grad, ``I`` an integer tensor, ``C`` a constant float tensor.
The torch comparisons skip without torch; gradcheck runs everywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import gradcheck
from numbagrad.nn import functional as NF

pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths:UserWarning")


@dataclass
class R:
    """A float64 tensor requiring grad, drawn uniformly from ``domain``."""

    shape: tuple
    domain: tuple = (-2.0, 2.0)

    def draw(self, rng):
        return rng.uniform(*self.domain, self.shape)


@dataclass
class C(R):
    """Like ``R`` but not requiring grad."""


@dataclass
class I:  # noqa: E742 - a spec, not a variable
    """An int64 tensor in ``[0, high)``."""

    shape: tuple
    high: int = 3

    def draw(self, rng):
        return rng.integers(0, self.high, self.shape)


@dataclass
class Case:
    name: str
    fn: object
    specs: tuple
    true_gradient: bool = True  # False: torch's gradient is deliberately not the derivative (padding_idx)
    rtol: float = 1e-10

    def __str__(self) -> str:
        return self.name


def _case(name, fn, *specs, **kw):
    return pytest.param(Case(name, fn, specs, **kw), id=name)


X = R((3, 4), (-3.0, 3.0))
IMG = R((2, 3, 6, 7))

CASES = [
    # activations
    _case("relu6", lambda lib, F, x: F.relu6(x * 4), X),
    _case("hardtanh", lambda lib, F, x: F.hardtanh(x, -0.5, 1.5), X),
    _case("leaky_relu", lambda lib, F, x: F.leaky_relu(x, 0.2), X),
    _case("leaky_relu_default", lambda lib, F, x: F.leaky_relu(x), X),
    _case("elu", lambda lib, F, x: F.elu(x, 0.7), X),
    _case("selu", lambda lib, F, x: F.selu(x), X),
    _case("gelu", lambda lib, F, x: F.gelu(x), X),
    _case("gelu_tanh", lambda lib, F, x: F.gelu(x, approximate="tanh"), X),
    _case("silu", lambda lib, F, x: F.silu(x), X),
    _case("mish", lambda lib, F, x: F.mish(x), X),
    _case("softplus", lambda lib, F, x: F.softplus(x), X),
    _case("softplus_beta_threshold", lambda lib, F, x: F.softplus(x, beta=2.0, threshold=3.0), X),
    _case("softsign", lambda lib, F, x: F.softsign(x), X),
    _case("hardswish", lambda lib, F, x: F.hardswish(x * 2), X),
    _case("hardsigmoid", lambda lib, F, x: F.hardsigmoid(x * 2), X),
    _case("logsigmoid", lambda lib, F, x: F.logsigmoid(x * 10), X),
    _case("tanhshrink", lambda lib, F, x: F.tanhshrink(x), X),
    _case("glu", lambda lib, F, x: F.glu(x), X),
    _case("glu_dim0", lambda lib, F, x: F.glu(x, 0), R((4, 3))),
    _case("softmin", lambda lib, F, x: F.softmin(x, 1), X),
    # torch's celu backward takes 1 / alpha in float32 (derivatives.yaml: 1.0 / alpha.toFloat()), a relative 1e-8
    _case("celu", lambda lib, F, x: F.celu(x, 0.7), X, rtol=1e-7),
    _case("celu_inplace", lambda lib, F, x: F.celu(x * 1, 1.5, inplace=True), X, rtol=1e-7),
    _case("hardshrink", lambda lib, F, x: F.hardshrink(x), X),
    _case("softshrink", lambda lib, F, x: F.softshrink(x, 0.8), X),
    _case("threshold", lambda lib, F, x: F.threshold(x, 0.5, -2.0), X),
    _case("threshold_", lambda lib, F, x: F.threshold_(x * 1, 0.5, -2.0), X),
    _case("rrelu_eval", lambda lib, F, x: F.rrelu(x, 0.1, 0.3), X),
    _case("rrelu_eval_inplace", lambda lib, F, x: F.rrelu(x * 1, inplace=True), X),
    _case("prelu_one_weight", lambda lib, F, x, w: F.prelu(x, w), X, R((1,))),
    _case("prelu_per_channel", lambda lib, F, x, w: F.prelu(x, w), IMG, R((3,))),
    _case("prelu_1d_input", lambda lib, F, x, w: F.prelu(x, w), R((5,)), R((1,))),
    # in place (on a non-leaf)
    _case("relu6_inplace", lambda lib, F, x: F.relu6(x * 4, inplace=True), X),
    _case("leaky_relu_", lambda lib, F, x: F.leaky_relu_(x * 1, 0.3), X),
    _case("leaky_relu_inplace", lambda lib, F, x: F.leaky_relu(x * 1, 0.3, inplace=True), X),
    _case("elu_", lambda lib, F, x: F.elu_(x * 1, 0.5), X),
    _case("selu_inplace", lambda lib, F, x: F.selu(x * 1, inplace=True), X),
    _case("hardtanh_", lambda lib, F, x: F.hardtanh_(x * 1, -1.0, 0.5), X),
    _case("silu_inplace", lambda lib, F, x: F.silu(x * 1, inplace=True), X),
    _case("mish_inplace", lambda lib, F, x: F.mish(x * 1, inplace=True), X),
    _case("hardswish_inplace", lambda lib, F, x: F.hardswish(x * 2, inplace=True), X),
    _case("hardsigmoid_inplace", lambda lib, F, x: F.hardsigmoid(x * 2, inplace=True), X),
    # distances and normalization of vectors
    _case("normalize", lambda lib, F, x: F.normalize(x), X),
    _case("normalize_p1_dim0", lambda lib, F, x: F.normalize(x, p=1.0, dim=0), X),
    _case("cosine_similarity", lambda lib, F, a, b: F.cosine_similarity(a, b), X, X),
    _case("cosine_similarity_broadcast", lambda lib, F, a, b: F.cosine_similarity(a, b, dim=-1), R((3, 4)), R((4,))),
    _case("pairwise_distance", lambda lib, F, a, b: F.pairwise_distance(a, b), X, X),
    _case("pairwise_distance_p1_keepdim", lambda lib, F, a, b: F.pairwise_distance(a, b, 1.0, keepdim=True), X, X),
    _case("pairwise_distance_p3", lambda lib, F, a, b: F.pairwise_distance(a, b, 3.0), X, X),
    _case("pairwise_distance_1d", lambda lib, F, a, b: F.pairwise_distance(a, b), R((5,)), R((5,))),
    # padding, embedding
    _case("pad", lambda lib, F, x: F.pad(x, (1, 2)), X),
    _case("pad_value_2d", lambda lib, F, x: F.pad(x, (1, 0, 2, 1), value=-1.5), IMG),
    _case("pad_negative_crops", lambda lib, F, x: F.pad(x, (-1, 2, 1, -1)), IMG),
    _case("embedding", lambda lib, F, w, i: F.embedding(i, w), R((5, 3)), I((2, 4), 5)),
    _case(
        "embedding_padding_idx",
        lambda lib, F, w, i: F.embedding(i, w, padding_idx=1),
        R((5, 3)),
        I((2, 4), 5),
        true_gradient=False,
    ),
    _case(
        "embedding_scale_grad_by_freq",
        lambda lib, F, w, i: F.embedding(i, w, scale_grad_by_freq=True),
        R((5, 3)),
        I((2, 4), 3),
        true_gradient=False,
    ),
    # normalization layers
    _case("layer_norm", lambda lib, F, x: F.layer_norm(x, (4,)), X),
    _case("layer_norm_affine", lambda lib, F, x, w, b: F.layer_norm(x, (6, 7), w, b), IMG, R((6, 7)), R((6, 7))),
    _case("layer_norm_weight_only", lambda lib, F, x, w: F.layer_norm(x, (4,), w, eps=1e-3), X, R((4,))),
    _case(
        "batch_norm_train",
        lambda lib, F, x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        IMG,
        R((3,)),
        R((3,)),
    ),
    _case("batch_norm_train_1d", lambda lib, F, x: F.batch_norm(x, None, None, training=True), R((5, 3))),
    _case(
        "batch_norm_eval",
        lambda lib, F, x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=False),
        IMG,
        C((3,)),
        C((3,), (0.5, 2.0)),
        R((3,)),
        R((3,)),
    ),
    _case("group_norm", lambda lib, F, x: F.group_norm(x, 3), IMG),
    _case("group_norm_affine", lambda lib, F, x, w, b: F.group_norm(x, 1, w, b), IMG, R((3,)), R((3,))),
    _case("group_norm_3d", lambda lib, F, x, w, b: F.group_norm(x, 2, w, b), R((3, 4, 5)), R((4,)), R((4,))),
    # convolution and pooling
    _case("conv2d", lambda lib, F, x, w, b: F.conv2d(x, w, b), IMG, R((4, 3, 3, 2)), R((4,))),
    _case(
        "conv2d_stride_padding_dilation",
        lambda lib, F, x, w: F.conv2d(x, w, None, stride=(2, 1), padding=(1, 2), dilation=(1, 2)),
        IMG,
        R((2, 3, 2, 3)),
    ),
    _case("conv2d_groups", lambda lib, F, x, w, b: F.conv2d(x, w, b, groups=3), IMG, R((6, 1, 3, 3)), R((6,))),
    _case("conv2d_same", lambda lib, F, x, w: F.conv2d(x, w, padding="same"), IMG, R((2, 3, 2, 4))),
    _case("conv2d_same_dilated", lambda lib, F, x, w: F.conv2d(x, w, padding="same", dilation=2), IMG, R((2, 3, 3, 2))),
    _case("conv2d_valid", lambda lib, F, x, w: F.conv2d(x, w, padding="valid"), IMG, R((2, 3, 2, 2))),
    _case("conv2d_unbatched", lambda lib, F, x, w: F.conv2d(x, w, stride=2), R((3, 6, 7)), R((2, 3, 3, 3))),
    _case("conv1d", lambda lib, F, x, w, b: F.conv1d(x, w, b, padding=1), R((2, 3, 9)), R((4, 3, 3)), R((4,))),
    _case(
        "conv1d_stride_dilation_groups",
        lambda lib, F, x, w: F.conv1d(x, w, stride=2, dilation=2, groups=3),
        R((2, 3, 11)),
        R((6, 1, 2)),
    ),
    _case("conv1d_same_unbatched", lambda lib, F, x, w: F.conv1d(x, w, padding="same"), R((3, 8)), R((2, 3, 4))),
    _case("max_pool2d", lambda lib, F, x: F.max_pool2d(x, 2), IMG),
    _case("max_pool2d_stride_padding", lambda lib, F, x: F.max_pool2d(x, 3, 2, 1), IMG),
    _case("max_pool2d_dilation_ceil", lambda lib, F, x: F.max_pool2d(x, 2, 2, dilation=2, ceil_mode=True), IMG),
    _case("max_pool2d_unbatched_rect", lambda lib, F, x: F.max_pool2d(x, (2, 3), (1, 2)), R((3, 6, 7))),
    _case("max_pool2d_indices", lambda lib, F, x: F.max_pool2d(x, 2, return_indices=True), IMG),
    _case("avg_pool2d", lambda lib, F, x: F.avg_pool2d(x, 2), IMG),
    _case("avg_pool2d_padding", lambda lib, F, x: F.avg_pool2d(x, 3, 2, 1), IMG),
    _case(
        "avg_pool2d_no_pad_count_ceil",
        lambda lib, F, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        IMG,
    ),
    _case("avg_pool2d_divisor", lambda lib, F, x: F.avg_pool2d(x, (2, 3), divisor_override=4), IMG),
    _case("adaptive_avg_pool2d", lambda lib, F, x: F.adaptive_avg_pool2d(x, (4, 3)), IMG),
    _case("adaptive_avg_pool2d_grow", lambda lib, F, x: F.adaptive_avg_pool2d(x, 8), R((2, 3, 5, 4))),
    _case("adaptive_avg_pool2d_none", lambda lib, F, x: F.adaptive_avg_pool2d(x, (None, 2)), IMG),
    _case("adaptive_avg_pool2d_1x1", lambda lib, F, x: F.adaptive_avg_pool2d(x, 1), IMG),
    # losses
    _case("l1_loss", lambda lib, F, x, t: F.l1_loss(x, t), X, C((3, 4))),
    _case("l1_loss_sum", lambda lib, F, x, t: F.l1_loss(x, t, reduction="sum"), X, R((3, 4))),
    _case("l1_loss_none", lambda lib, F, x, t: F.l1_loss(x, t, reduction="none"), X, R((3, 4))),
    _case("l1_loss_weight", lambda lib, F, x, t, w: F.l1_loss(x, t, weight=w), X, C((3, 4)), C((3, 4), (0, 1))),
    _case("mse_loss_weight", lambda lib, F, x, t, w: F.mse_loss(x, t, weight=w), X, C((3, 4)), C((3, 4), (0, 1))),
    _case("smooth_l1_loss", lambda lib, F, x, t: F.smooth_l1_loss(x, t), X, R((3, 4))),
    _case("smooth_l1_loss_beta", lambda lib, F, x, t: F.smooth_l1_loss(x, t, reduction="sum", beta=0.5), X, C((3, 4))),
    _case("smooth_l1_loss_beta0", lambda lib, F, x, t: F.smooth_l1_loss(x, t, beta=0.0), X, C((3, 4))),
    _case("huber_loss", lambda lib, F, x, t: F.huber_loss(x, t), X, R((3, 4))),
    _case("huber_loss_delta_none", lambda lib, F, x, t: F.huber_loss(x, t, "none", 0.5), X, C((3, 4))),
    _case("huber_loss_weight", lambda lib, F, x, t, w: F.huber_loss(x, t, weight=w), X, C((3, 4)), C((3, 4), (0, 1))),
    _case("nll_loss", lambda lib, F, x, t: F.nll_loss(x, t), X, I((3,), 4)),
    _case("nll_loss_weight_sum", lambda lib, F, x, t, w: F.nll_loss(x, t, w, reduction="sum"), X, I((3,), 4), C((4,))),
    _case(
        "nll_loss_weight_ignore_mean",
        lambda lib, F, x, w: F.nll_loss(x, lib.tensor([1, 3, 1]), w, ignore_index=3),
        X,
        C((4,), (0.5, 2.0)),
    ),
    _case("nll_loss_none", lambda lib, F, x, t: F.nll_loss(x, t, reduction="none"), X, I((3,), 4)),
    _case("nll_loss_1d", lambda lib, F, x: F.nll_loss(x, lib.tensor(2)), R((4,))),
    _case("nll_loss_4d", lambda lib, F, x, t: F.nll_loss(x, t), IMG, I((2, 6, 7), 3)),
    _case("nll_loss_3d_none", lambda lib, F, x, t: F.nll_loss(x, t, reduction="none"), R((2, 3, 5)), I((2, 5), 3)),
    _case("cross_entropy", lambda lib, F, x, t: F.cross_entropy(x, t), X, I((3,), 4)),
    _case("cross_entropy_sum", lambda lib, F, x, t: F.cross_entropy(x, t, reduction="sum"), X, I((3,), 4)),
    _case("cross_entropy_none", lambda lib, F, x, t: F.cross_entropy(x, t, reduction="none"), X, I((3,), 4)),
    _case(
        "cross_entropy_weight_ignore",
        lambda lib, F, x, w: F.cross_entropy(x, lib.tensor([1, 0, 2]), w, ignore_index=0),
        X,
        C((4,), (0.5, 2.0)),
    ),
    _case("cross_entropy_smoothing", lambda lib, F, x, t: F.cross_entropy(x, t, label_smoothing=0.1), X, I((3,), 4)),
    _case(
        "cross_entropy_smoothing_weight_ignore",
        lambda lib, F, x, w: F.cross_entropy(x, lib.tensor([1, 3, 2]), w, ignore_index=3, label_smoothing=0.3),
        X,
        C((4,), (0.5, 2.0)),
    ),
    _case(
        "cross_entropy_smoothing_none",
        lambda lib, F, x, t: F.cross_entropy(x, t, reduction="none", label_smoothing=0.2),
        X,
        I((3,), 4),
    ),
    _case(
        "cross_entropy_smoothing_sum_weight",
        lambda lib, F, x, t, w: F.cross_entropy(x, t, w, reduction="sum", label_smoothing=0.2),
        X,
        I((3,), 4),
        C((4,), (0.5, 2.0)),
    ),
    _case("cross_entropy_1d", lambda lib, F, x: F.cross_entropy(x, lib.tensor(1)), R((4,))),
    _case("cross_entropy_4d", lambda lib, F, x, t: F.cross_entropy(x, t), IMG, I((2, 6, 7), 3)),
    _case(
        "cross_entropy_3d_none",
        lambda lib, F, x, t: F.cross_entropy(x, t, reduction="none"),
        R((2, 3, 5)),
        I((2, 5), 3),
    ),  # fmt: skip
    _case("cross_entropy_probs", lambda lib, F, x, p: F.cross_entropy(x, p), X, C((3, 4), (0, 1))),
    _case("cross_entropy_probs_sum", lambda lib, F, x, p: F.cross_entropy(x, p, reduction="sum"), X, C((3, 4), (0, 1))),
    _case(
        "cross_entropy_probs_weight_smoothing_none",
        lambda lib, F, x, p, w: F.cross_entropy(x, p, w, reduction="none", label_smoothing=0.1),
        X,
        C((3, 4), (0, 1)),
        C((4,), (0.5, 2.0)),
    ),
    _case(
        "binary_cross_entropy",
        lambda lib, F, x, t: F.binary_cross_entropy(x, t),
        R((3, 4), (0.05, 0.95)),
        C((3, 4), (0, 1)),
    ),  # fmt: skip
    _case(
        "binary_cross_entropy_weight_sum",
        lambda lib, F, x, t, w: F.binary_cross_entropy(x, t, w, reduction="sum"),
        R((3, 4), (0.05, 0.95)),
        R((3, 4), (0, 1)),
        C((4,), (0.5, 2.0)),
    ),
    _case("bce_with_logits", lambda lib, F, x, t: F.binary_cross_entropy_with_logits(x, t), X, R((3, 4), (0, 1))),
    _case(
        "bce_with_logits_weight_pos_weight",
        lambda lib, F, x, t, w, pw: F.binary_cross_entropy_with_logits(x, t, w, pos_weight=pw, reduction="none"),
        X,
        R((3, 4), (0, 1)),
        C((3, 1), (0.5, 2.0)),
        C((4,), (0.5, 3.0)),
    ),
    _case("kl_div_batchmean", lambda lib, F, x, t: F.kl_div(x, t, reduction="batchmean"), X, C((3, 4), (0, 1))),
    _case("kl_div_sum", lambda lib, F, x, t: F.kl_div(x, t, reduction="sum"), X, R((3, 4), (0.1, 1))),
    _case(
        "kl_div_none_log_target", lambda lib, F, x, t: F.kl_div(x, t, reduction="none", log_target=True), X, R((3, 4))
    ),
    # mixed second derivatives (each input's gradient differentiated by the other input): the generated
    # tests/test_first_vs_second_order.py runs gradgradcheck on every case here
    _case("second_conv2d", lambda lib, F, x, w: F.conv2d(x, w, stride=2, padding=1), R((2, 2, 4, 5)), R((3, 2, 3, 3))),
    _case(
        "second_conv2d_groups",
        lambda lib, F, x, w: F.conv2d(x, w.reshape(4, 1, 3, 3)[:, :, :2], groups=2, dilation=(1, 2)),
        R((2, 2, 4, 5)),
        R((4, 9)),
    ),
    _case("second_max_pool2d", lambda lib, F, x, w: F.max_pool2d(x * w.sum(), 2, 1), R((2, 2, 4, 5)), R((2, 3))),
    _case(
        "second_avg_pool2d",
        lambda lib, F, x, w: F.avg_pool2d(x * w.sum(), 3, 2, 1, count_include_pad=False) ** 2,
        R((2, 2, 4, 5)),
        R((2, 3)),
    ),
    _case(
        "second_adaptive_avg_pool2d",
        lambda lib, F, x, w: F.adaptive_avg_pool2d(x * w.sum(), (2, 3)) ** 2,
        R((2, 2, 4, 5)),
        R((2, 3)),
    ),
    _case(
        "second_layer_norm",
        lambda lib, F, x, w: F.layer_norm(x, (5,), w[:5], w[5:]),
        R((1, 2, 2, 5)),
        R((10,)),
    ),
    _case("second_prelu", lambda lib, F, x, w: F.prelu(x, w) * x, R((1, 2, 2, 5)), R((2,))),
    _case("second_group_norm", lambda lib, F, x, w: F.group_norm(x, 2, w[:2], w[2:]), R((2, 2, 4, 5)), R((4,))),
    _case(
        "second_batch_norm",
        lambda lib, F, x, w: F.batch_norm(x, None, None, w[:2], w[2:], training=True),
        R((2, 2, 4, 5)),
        R((4,)),
    ),
    _case(
        "second_cross_entropy",
        lambda lib, F, x, w: F.cross_entropy(x * w, lib.tensor([0, 4, 2, 1]), label_smoothing=0.2),
        R((4, 5)),
        R((5,)),
    ),
    _case(
        "second_nll_loss",
        lambda lib, F, x, w: F.nll_loss((x * w).log_softmax(1), lib.tensor([0, 4, 2, 1])),
        R((4, 5)),
        R((5,)),
    ),
    _case(
        "second_embedding",
        lambda lib, F, x, w: F.embedding(lib.tensor([1, 0, 1]), w) * x,
        R((3, 3)),
        R((6, 3)),
    ),
    _case(
        "second_pad",
        lambda lib, F, x, w: F.pad(x * w.sum(), (1, -1, 2, 0), value=0.5) ** 2,
        R((2, 2, 4, 5)),
        R((2, 3)),
    ),
    _case("second_glu", lambda lib, F, x, w: F.glu(x * w.sum(), 1), R((2, 2, 4, 5)), R((2, 3))),
    _case("second_pairwise_distance", lambda lib, F, x, w: F.pairwise_distance(x, w, p=3.0), R((4, 5)), R((5,))),
    _case("second_smooth_l1_loss", lambda lib, F, x, t: F.smooth_l1_loss(x, t, beta=0.5), R((18,)), R((18,))),
    _case(
        "second_bce_with_logits",
        lambda lib, F, x, t: F.binary_cross_entropy_with_logits(x, t.sigmoid()),
        R((18,)),
        R((18,)),
    ),
]


def _inputs(case: Case, lib, seed: int = 0):
    rng = np.random.default_rng(seed)
    out = []
    for spec in case.specs:
        data = spec.draw(rng)
        t = lib.tensor(data)
        if type(spec) is R:
            t.requires_grad_(True)
        out.append(t)
    return out


def _tensors(out) -> list:
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    return [out]


@pytest.mark.parametrize("case", [c for c in CASES if c.values[0].true_gradient])
def test_gradcheck_float64(case):
    inputs = _inputs(case, numbagrad)
    diff = [t for t in inputs if t.requires_grad]

    def fn(*leaves):
        it = iter(leaves)
        args = [next(it) if t.requires_grad else t for t in inputs]
        return tuple(t for t in _tensors(case.fn(numbagrad, NF, *args)) if t.is_floating_point())

    assert gradcheck(fn, tuple(diff))


@pytest.mark.torch
@pytest.mark.parametrize("case", CASES)
def test_matches_torch(case):
    torch = pytest.importorskip("torch")
    tF = torch.nn.functional
    ours_in, theirs_in = _inputs(case, numbagrad), _inputs(case, torch)
    ours, theirs = _tensors(case.fn(numbagrad, NF, *ours_in)), _tensors(case.fn(torch, tF, *theirs_in))
    assert len(ours) == len(theirs)
    weights = np.random.default_rng(1)
    for a, b in zip(ours, theirs):
        assert a.dtype.name == str(b.dtype).replace("torch.", "")
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=case.rtol, atol=1e-12)
        node = type(b.grad_fn).__name__ if b.grad_fn is not None else None
        assert (a.grad_fn.name() if a.grad_fn is not None else None) == node
    pairs = [(a, b) for a, b in zip(ours, theirs) if b.requires_grad]
    if not pairs:
        return
    g = [weights.standard_normal(tuple(b.shape)) for _, b in pairs]
    sum((a * numbagrad.tensor(w)).sum() for (a, _), w in zip(pairs, g)).backward()
    sum((b * torch.tensor(w)).sum() for (_, b), w in zip(pairs, g)).backward()
    for x, y in zip(ours_in, theirs_in):
        if y.requires_grad:
            np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=case.rtol, atol=1e-12)


@pytest.mark.torch
@pytest.mark.parametrize("case", CASES)
def test_float32_matches_torch(case):
    """The same call in float32 (what models use): values within float32 rounding."""
    torch = pytest.importorskip("torch")
    ours_in = [t.detach().float().requires_grad_(t.requires_grad) if t.is_floating_point() else t
               for t in _inputs(case, numbagrad)]  # fmt: skip
    theirs_in = [t.detach().float().requires_grad_(t.requires_grad) if t.is_floating_point() else t
                 for t in _inputs(case, torch)]  # fmt: skip
    ours = _tensors(case.fn(numbagrad, NF, *ours_in))
    theirs = _tensors(case.fn(torch, torch.nn.functional, *theirs_in))
    for a, b in zip(ours, theirs):
        assert a.dtype.name == str(b.dtype).replace("torch.", "")
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=2e-5, atol=2e-6)


def test_case_names_are_unique():
    names = [p.values[0].name for p in CASES]
    assert len(names) == len(set(names))


def test_erf_row_is_math_erf():
    x = numbagrad.tensor([-1.5, 0.0, 0.3, 2.0], dtype=numbagrad.float64)
    from numbagrad.ops.elementwise import CLASSES

    out = CLASSES["erf"][""].apply(x)
    np.testing.assert_allclose(out.numpy(), [math.erf(v) for v in (-1.5, 0.0, 0.3, 2.0)], rtol=1e-15)


# --- errors: the same exception type and message as torch ------------------------------------------------------
ERRORS = {
    "gelu_approximate": lambda lib, F: F.gelu(lib.zeros(2), approximate="erf"),
    "elu_long": lambda lib, F: F.elu(lib.tensor([1, 2])),
    "leaky_relu_long": lambda lib, F: F.leaky_relu(lib.tensor([1, 2])),
    "glu_odd": lambda lib, F: F.glu(lib.zeros(2, 3)),
    "glu_scalar": lambda lib, F: F.glu(lib.tensor(1.0)),
    "dropout_p": lambda lib, F: F.dropout(lib.zeros(2), 1.5),
    "one_hot_dtype": lambda lib, F: F.one_hot(lib.tensor([1.0])),
    "one_hot_negative": lambda lib, F: F.one_hot(lib.tensor([-1, 2])),
    "one_hot_too_big": lambda lib, F: F.one_hot(lib.tensor([1, 3]), 3),
    "one_hot_empty": lambda lib, F: F.one_hot(lib.zeros(0, dtype=lib.int64)),
    "pad_odd": lambda lib, F: F.pad(lib.zeros(2, 3), (1, 2, 3)),
    "pad_too_long": lambda lib, F: F.pad(lib.zeros(3), (1, 1, 1, 1)),
    "embedding_float_indices": lambda lib, F: F.embedding(lib.tensor([1.0]), lib.zeros(3, 2)),
    "embedding_out_of_range": lambda lib, F: F.embedding(lib.tensor([3]), lib.zeros(3, 2)),
    "layer_norm_shape": lambda lib, F: F.layer_norm(lib.zeros(2, 3), (4,)),
    "layer_norm_weight": lambda lib, F: F.layer_norm(lib.zeros(2, 3), (3,), lib.zeros(2)),
    "group_norm_groups": lambda lib, F: F.group_norm(lib.zeros(2, 3, 4), 2),
    "batch_norm_single_value": lambda lib, F: F.batch_norm(lib.zeros(1, 3), None, None, training=True),
    "conv2d_input_dims": lambda lib, F: F.conv2d(lib.zeros(3, 4), lib.zeros(2, 3, 1, 1)),
    "conv2d_channels": lambda lib, F: F.conv2d(lib.zeros(2, 8, 5, 5), lib.zeros(4, 3, 3, 3)),
    "conv2d_kernel_too_big": lambda lib, F: F.conv2d(lib.zeros(1, 1, 2, 2), lib.zeros(1, 1, 3, 3)),
    "conv2d_groups_weight": lambda lib, F: F.conv2d(lib.zeros(1, 2, 5, 5), lib.zeros(3, 1, 3, 3), groups=2),
    "conv2d_bias": lambda lib, F: F.conv2d(lib.zeros(1, 3, 5, 5), lib.zeros(4, 3, 3, 3), lib.zeros(3)),
    "conv2d_same_strided": lambda lib, F: F.conv2d(
        lib.zeros(1, 1, 5, 5), lib.zeros(1, 1, 3, 3), stride=2, padding="same"
    ),  # fmt: skip
    "conv2d_padding_string": lambda lib, F: F.conv2d(lib.zeros(1, 1, 5, 5), lib.zeros(1, 1, 3, 3), padding="full"),
    "conv2d_dtype": lambda lib, F: F.conv2d(lib.zeros(1, 1, 5, 5, dtype=lib.float64), lib.zeros(1, 1, 3, 3)),
    "conv1d_input_dims": lambda lib, F: F.conv1d(lib.zeros(2, 3, 4, 5), lib.zeros(2, 3, 1)),
    "max_pool2d_padding": lambda lib, F: F.max_pool2d(lib.zeros(1, 1, 6, 6), 2, padding=2),
    "max_pool2d_too_small": lambda lib, F: F.max_pool2d(lib.zeros(1, 3, 2, 2), 3),
    "avg_pool2d_padding": lambda lib, F: F.avg_pool2d(lib.zeros(1, 1, 6, 6), 3, padding=2),
    "avg_pool2d_divisor": lambda lib, F: F.avg_pool2d(lib.zeros(1, 1, 6, 6), 2, divisor_override=0),
    "cross_entropy_target_dtype": lambda lib, F: F.cross_entropy(lib.zeros(2, 3), lib.tensor([0, 1], dtype=lib.int32)),
    "cross_entropy_batch": lambda lib, F: F.cross_entropy(lib.zeros(2, 3), lib.tensor([0, 1, 2])),
    "cross_entropy_out_of_bounds": lambda lib, F: F.cross_entropy(lib.zeros(2, 3), lib.tensor([0, 3])),
    "cross_entropy_smoothing": lambda lib, F: F.cross_entropy(lib.zeros(2, 3), lib.tensor([0, 1]), label_smoothing=1.5),
    "cross_entropy_reduction": lambda lib, F: F.cross_entropy(lib.zeros(2, 3), lib.tensor([0, 1]), reduction="avg"),
    "cross_entropy_weight": lambda lib, F: F.cross_entropy(lib.zeros(2, 3), lib.tensor([0, 1]), lib.ones(2)),
    "cross_entropy_probs_ignore": lambda lib, F: F.cross_entropy(lib.zeros(2, 3), lib.zeros(2, 3), ignore_index=1),
    "nll_loss_target_shape": lambda lib, F: F.nll_loss(lib.zeros(2, 3, 4), lib.zeros(2, 5, dtype=lib.int64)),
    "nll_loss_multi_target": lambda lib, F: F.nll_loss(lib.zeros(3), lib.zeros(2, 2, dtype=lib.int64)),
    "bce_range": lambda lib, F: F.binary_cross_entropy(lib.tensor([0.5, 1.5]), lib.tensor([0.0, 1.0])),
    "bce_with_logits_size": lambda lib, F: F.binary_cross_entropy_with_logits(lib.zeros(3), lib.zeros(3, 1)),
    "smooth_l1_beta": lambda lib, F: F.smooth_l1_loss(lib.zeros(3), lib.zeros(3), beta=-1.0),
    "huber_delta": lambda lib, F: F.huber_loss(lib.zeros(3), lib.zeros(3), delta=0.0),
    "l1_weight_size": lambda lib, F: F.l1_loss(lib.zeros(3), lib.zeros(3), weight=lib.ones(2)),
    "prelu_channels": lambda lib, F: F.prelu(lib.zeros(2, 3), lib.ones(2)),
    "prelu_weight_dims": lambda lib, F: F.prelu(lib.zeros(2, 3), lib.ones(3, 1)),
    "prelu_dtypes": lambda lib, F: F.prelu(lib.zeros(2, 3, dtype=lib.float64), lib.ones(3)),
    "softshrink_negative": lambda lib, F: F.softshrink(lib.zeros(3), -1.0),
    "softshrink_negative_double": lambda lib, F: F.softshrink(lib.zeros(3, dtype=lib.float64), -0.5),
    "hardshrink_int": lambda lib, F: F.hardshrink(lib.tensor([1, 2])),
    "rrelu_int": lambda lib, F: F.rrelu(lib.tensor([1, 2])),
}


def _message(err: Exception) -> str:
    return str(err).replace("numbagrad", "torch").split("\n")[0]


@pytest.mark.torch
@pytest.mark.parametrize("name", ERRORS)
def test_errors_match_torch(name):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as theirs:
        ERRORS[name](torch, torch.nn.functional)
    with pytest.raises(Exception) as ours:
        ERRORS[name](numbagrad, NF)
    assert type(ours.value).__name__ == type(theirs.value).__name__
    assert _message(ours.value) == _message(theirs.value)


# --- behaviour without a torch counterpart to compare draws with -------------------------------------------------
def test_dropout_zeroes_with_probability_p_and_scales_the_rest():
    x = numbagrad.ones(20000, dtype=numbagrad.float64, requires_grad=True)
    out = NF.dropout(x, 0.25)
    values = out.detach().numpy()
    assert set(np.unique(values)) == {0.0, 1 / 0.75}
    assert abs((values == 0).mean() - 0.25) < 0.02
    assert out.grad_fn.name() == "MulBackward0"
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), values)  # the gradient is the mask


def test_dropout_in_eval_or_with_p_zero_returns_the_input_itself():
    x = numbagrad.randn(3)
    assert NF.dropout(x, 0.5, training=False) is x and NF.dropout(x, 0.0) is x


def test_dropout_p_one_and_inplace():
    x = numbagrad.tensor([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(NF.dropout(x, 1.0).numpy(), [0.0, -0.0, 0.0])
    y = numbagrad.ones(1000)
    assert NF.dropout(y, 0.5, inplace=True) is y and set(np.unique(y.numpy())) == {0.0, 2.0}


def test_gumbel_softmax_soft_samples_are_distributions():
    logits = numbagrad.randn(5, 4, requires_grad=True)
    y = NF.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(y.detach().numpy().sum(1), np.ones(5), rtol=1e-6)
    assert y.grad_fn.name() == "SoftmaxBackward0"


def test_gumbel_softmax_hard_is_one_hot_with_the_soft_gradient():
    numbagrad.manual_seed(3)
    logits = numbagrad.randn(6, 5, requires_grad=True)
    y = NF.gumbel_softmax(logits, hard=True, dim=1)
    values = y.detach().numpy()
    assert set(np.unique(values)) == {0.0, 1.0} and np.array_equal(values.sum(1), np.ones(6))
    assert y.grad_fn.name() == "AddBackward0"
    w = numbagrad.randn(6, 5)
    (y * w).sum().backward()
    # straight through: the gradient is that of y_soft = softmax((logits + g) / tau), whatever g was drawn
    soft_grad = logits.grad.numpy()
    assert np.allclose(soft_grad.sum(1), 0.0, atol=1e-6) and np.abs(soft_grad).sum() > 0


def test_one_hot_matches_hand_computed_vectors():
    out = NF.one_hot(numbagrad.tensor([[0, 2], [1, 0]]))
    assert out.dtype is numbagrad.int64 and out.shape == (2, 2, 3)
    np.testing.assert_array_equal(out.numpy(), [[[1, 0, 0], [0, 0, 1]], [[0, 1, 0], [1, 0, 0]]])
    assert NF.one_hot(numbagrad.tensor([1]), 4).tolist() == [[0, 1, 0, 0]]


def test_embedding_max_norm_renormalizes_the_looked_up_rows_in_place():
    w = numbagrad.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    out = NF.embedding(numbagrad.tensor([0, 1]), w, max_norm=1.0)
    np.testing.assert_allclose(np.linalg.norm(w.numpy(), axis=1), [1.0, 0.5, 10.0], rtol=1e-6)
    np.testing.assert_allclose(out.numpy(), w.numpy()[:2])


def test_cosine_similarity_clamps_tiny_norms():
    a = numbagrad.zeros(2, 3)
    np.testing.assert_array_equal(NF.cosine_similarity(a, a).numpy(), [0.0, 0.0])


#: Double backward (create_graph) through the fused nodes: their backward is built from differentiable ops.
@pytest.mark.torch
@pytest.mark.parametrize(
    "call",
    [
        lambda F, x: F.relu6(x),
        lambda F, x: F.hardtanh(x, -3.0, 3.0),
        lambda F, x: F.leaky_relu(x, 0.1),
        lambda F, x: F.elu(x),
        lambda F, x: F.hardswish(x),
        lambda F, x: F.hardsigmoid(x),
        lambda F, x: F.softplus(x, 2.0, 6.0),
        lambda F, x: F.logsigmoid(x),
        lambda F, x: F.hardshrink(x, 3.0),
        lambda F, x: F.softshrink(x, 3.0),
        lambda F, x: F.threshold(x, 3.0, 1.0),
        lambda F, x: F.celu(x, 2.0),
    ],
    ids=[
        "relu6",
        "hardtanh",
        "leaky_relu",
        "elu",
        "hardswish",
        "hardsigmoid",
        "softplus",
        "logsigmoid",
        "hardshrink",
        "softshrink",
        "threshold",
        "celu",
    ],  # fmt: skip
)
def test_gradients_at_the_kinks_match_torch(call):
    """At the points where the pieces meet (0, 6, +-3, the softplus threshold) torch picks one side: so do we."""
    torch = pytest.importorskip("torch")
    points = [-3.0, 0.0, 3.0, 6.0, -0.0, 1e30, -1e30]
    ours = numbagrad.tensor(points, dtype=numbagrad.float64, requires_grad=True)
    theirs = torch.tensor(points, dtype=torch.float64, requires_grad=True)
    call(NF, ours).sum().backward()
    call(torch.nn.functional, theirs).sum().backward()
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


@pytest.mark.torch
def test_threshold_keeps_integer_tensors_integral(torch):
    ours = NF.threshold(numbagrad.tensor([1, 2, 3]), 1.5, 7)
    assert ours.dtype is numbagrad.int64
    assert ours.tolist() == torch.nn.functional.threshold(torch.tensor([1, 2, 3]), 1.5, 7).tolist()


def test_rrelu_in_training_scales_negatives_by_slopes_within_bounds_and_backpropagates_them():
    x = numbagrad.full((4000,), -1.0, dtype=numbagrad.float64, requires_grad=True)
    out = NF.rrelu(x, 0.1, 0.3, training=True)
    slopes = -out.detach().numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and abs(slopes.mean() - 0.2) < 0.01
    assert out.grad_fn.name() == "RreluWithNoiseBackward0"
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), slopes)
    positive = numbagrad.ones(3)
    np.testing.assert_array_equal(NF.rrelu(positive, training=True).numpy(), np.ones(3))
