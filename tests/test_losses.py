"""Losses, by hand: values small enough to compute on paper, and the options that change them (class weights,
ignore_index, label smoothing, probability targets, reductions). torch comparisons of every loss are in
tests/test_nn_functional.py."""

import math

import numpy as np
import pytest

import numbagrad
from numbagrad.nn import functional as F


def _t(values, **kw):
    return numbagrad.tensor(values, dtype=numbagrad.float64, **kw)


LOGITS = [[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]]
TARGET = [1, 2]


def _log_softmax(rows):
    rows = np.asarray(rows)
    return rows - np.log(np.exp(rows).sum(1, keepdims=True))


def test_cross_entropy_is_the_mean_negative_log_probability_of_the_targets():
    logp = _log_softmax(LOGITS)
    expected = -(logp[0, 1] + logp[1, 2]) / 2
    assert math.isclose(F.cross_entropy(_t(LOGITS), numbagrad.tensor(TARGET)).item(), expected, rel_tol=1e-12)


def test_label_smoothing_mixes_in_the_mean_over_all_classes():
    logp = _log_softmax(LOGITS)
    eps = 0.3
    per_sample = [(1 - eps) * -logp[i, t] + eps / 3 * -logp[i].sum() for i, t in enumerate(TARGET)]
    out = F.cross_entropy(_t(LOGITS), numbagrad.tensor(TARGET), label_smoothing=eps, reduction="none")
    np.testing.assert_allclose(out.numpy(), per_sample, rtol=1e-12)


def test_class_weights_weight_each_sample_and_the_mean_divides_by_their_sum():
    logp = _log_softmax(LOGITS)
    w = [0.5, 2.0, 4.0]
    expected = -(2.0 * logp[0, 1] + 4.0 * logp[1, 2]) / (2.0 + 4.0)
    out = F.cross_entropy(_t(LOGITS), numbagrad.tensor(TARGET), _t(w))
    assert math.isclose(out.item(), expected, rel_tol=1e-12)


def test_ignored_samples_count_for_nothing():
    logp = _log_softmax(LOGITS)
    x = _t(LOGITS, requires_grad=True)
    out = F.cross_entropy(x, numbagrad.tensor([1, -100]))
    assert math.isclose(out.item(), -logp[0, 1], rel_tol=1e-12)
    out.backward()
    np.testing.assert_array_equal(x.grad.numpy()[1], [0.0, 0.0, 0.0])


def test_every_sample_ignored_gives_nan_for_the_mean():
    out = F.cross_entropy(_t(LOGITS), numbagrad.tensor([-100, -100]))
    assert math.isnan(out.item())
    assert F.cross_entropy(_t(LOGITS), numbagrad.tensor([-100, -100]), reduction="sum").item() == 0.0


def test_every_sample_ignored_gives_a_zero_gradient():
    """torch: nan loss, zero gradient (the backward used to divide a Python float by the zero weight sum)."""
    x = _t(LOGITS, requires_grad=True)
    F.cross_entropy(x, numbagrad.tensor([-100, -100])).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros_like(LOGITS))


def test_cross_entropy_gradient_is_softmax_minus_one_hot_over_the_batch():
    x = _t(LOGITS, requires_grad=True)
    F.cross_entropy(x, numbagrad.tensor(TARGET)).backward()
    p = np.exp(_log_softmax(LOGITS))
    p[[0, 1], TARGET] -= 1
    np.testing.assert_allclose(x.grad.numpy(), p / 2, rtol=1e-12)


def test_probability_targets_average_over_samples():
    probs = [[0.2, 0.5, 0.3], [0.0, 0.1, 0.9]]
    logp = _log_softmax(LOGITS)
    expected = -(np.asarray(probs) * logp).sum() / 2
    assert math.isclose(F.cross_entropy(_t(LOGITS), _t(probs)).item(), expected, rel_tol=1e-12)


def test_cross_entropy_over_spatial_dims_is_per_pixel():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 2, 2))
    t = rng.integers(0, 3, (2, 2, 2))
    out = F.cross_entropy(_t(x), numbagrad.tensor(t), reduction="none")
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    expected = -np.take_along_axis(logp, t[:, None], 1)[:, 0]
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("options", [{}, {"ignore_index": 1, "label_smoothing": 0.2}, {"weighted": True}])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cross_entropy_per_pixel_values_and_gradients_are_torchs(torch, reduction, options, dtype):
    """An image's logits, (N, C, H, W), run along the pixels: the same losses and gradients as torch's
    ``nll_loss2d``, the rows' kernels' precision included (a NaN pixel is a NaN loss there, an ignored one 0)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4, 5, 6)).astype(dtype) * 3
    x[0, 2, 1, 1] = np.nan
    t = rng.integers(0, 4, (3, 5, 6))
    t[1, 0, :3] = 1
    options = dict(options)
    w = rng.uniform(0.5, 2, 4).astype(dtype) if options.pop("weighted", False) else None
    results = []
    for lib in (numbagrad, torch):
        xt = lib.tensor(x, requires_grad=True)
        weight = None if w is None else lib.tensor(w)
        loss = lib.nn.functional.cross_entropy(xt, lib.tensor(t), weight, reduction=reduction, **options)
        loss.backward(lib.ones_like(loss))
        results.append([loss.detach().numpy(), xt.grad.numpy()])
    for ours, theirs in zip(*results):
        assert ours.dtype == theirs.dtype
        np.testing.assert_allclose(ours, theirs, rtol=2e-6 if dtype == "float32" else 1e-12, atol=1e-7)


def test_cross_entropy_float32_stays_float32():
    out = F.cross_entropy(numbagrad.tensor(LOGITS), numbagrad.tensor(TARGET), label_smoothing=0.1)
    assert out.dtype is numbagrad.float32


def test_nll_loss_picks_the_target_entries():
    x = _t([[-1.0, -2.0, -3.0], [-0.5, -0.25, -4.0]], requires_grad=True)
    out = F.nll_loss(x, numbagrad.tensor([2, 0]), reduction="sum")
    assert out.item() == 3.5
    out.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0, -1], [-1, 0, 0]])


def test_smooth_l1_and_huber_switch_at_beta_and_delta():
    x, y = _t([0.0, 0.0, 0.0]), _t([0.2, 1.0, 3.0])
    np.testing.assert_allclose(F.smooth_l1_loss(x, y, reduction="none", beta=0.5).numpy(), [0.04, 0.75, 2.75])
    np.testing.assert_allclose(F.huber_loss(x, y, reduction="none", delta=0.5).numpy(), [0.02, 0.375, 1.375])


def test_binary_cross_entropy_clamps_the_log_at_minus_100():
    out = F.binary_cross_entropy(_t([0.0, 1.0]), _t([1.0, 0.0]), reduction="none")
    np.testing.assert_array_equal(out.numpy(), [100.0, 100.0])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_cross_entropy_values_and_both_gradients_are_torchs(torch, reduction, weighted, dtype):
    """Inputs at exactly 0 and 1 included: the loss's clamped logs, the input gradient's 1e-12 floor and the
    target gradient's unclamped infinities (torch's ``-logit(x)``)."""
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, (3, 5)).astype(dtype)
    x[0, :2] = 0.0, 1.0
    t, w = rng.uniform(0, 1, (3, 5)).astype(dtype), rng.uniform(0, 2, (3, 5)).astype(dtype)
    results = []
    for lib in (numbagrad, torch):
        xt, tt = lib.tensor(x, requires_grad=True), lib.tensor(t, requires_grad=True)
        loss = lib.nn.functional.binary_cross_entropy(xt, tt, lib.tensor(w) if weighted else None, reduction=reduction)
        loss.backward(lib.ones_like(loss))
        results.append([loss.detach().numpy(), xt.grad.numpy(), tt.grad.numpy()])
    for ours, theirs in zip(*results):
        assert ours.dtype == theirs.dtype
        np.testing.assert_allclose(ours, theirs, rtol=2e-6 if dtype == "float32" else 1e-12)


def test_binary_cross_entropy_second_derivatives_pass_gradgradcheck():
    x = _t([[0.2, 0.7, 0.45], [0.9, 0.1, 0.6]], requires_grad=True)
    t = _t([[0.3, 1.0, 0.0], [0.5, 0.2, 0.9]], requires_grad=True)
    w = _t([[1.0, 2.0, 0.5], [0.3, 1.5, 1.0]])
    for reduction in ("mean", "sum", "none"):
        fn = lambda a, b, reduction=reduction: F.binary_cross_entropy(a, b, w, reduction=reduction)  # noqa: E731
        assert numbagrad.autograd.gradcheck(fn, (x, t))
        assert numbagrad.autograd.gradgradcheck(fn, (x, t))


def test_bce_with_logits_pos_weight_scales_the_positive_term():
    x, t = _t([0.5]), _t([1.0])
    plain = F.binary_cross_entropy_with_logits(x, t).item()
    assert math.isclose(plain, math.log1p(math.exp(-0.5)), rel_tol=1e-12)
    weighted = F.binary_cross_entropy_with_logits(x, t, pos_weight=_t([3.0])).item()
    assert math.isclose(weighted, 3 * plain, rel_tol=1e-12)


def test_kl_div_batchmean_and_log_target():
    p = np.array([[0.25, 0.75], [0.5, 0.5]])
    q = np.array([[0.5, 0.5], [0.9, 0.1]])
    expected = (p * (np.log(p) - np.log(q))).sum() / 2
    out = F.kl_div(_t(np.log(q)), _t(p), reduction="batchmean")
    assert math.isclose(out.item(), expected, rel_tol=1e-12)
    out_log = F.kl_div(_t(np.log(q)), _t(np.log(p)), reduction="batchmean", log_target=True)
    assert math.isclose(out_log.item(), expected, rel_tol=1e-12)


def test_kl_div_mean_warns_as_torch():
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        F.kl_div(_t([[-1.0]]), _t([[0.5]]))


def test_l1_loss_with_broadcast_target_warns():
    with pytest.warns(UserWarning, match="Using a target size"):
        out = F.l1_loss(_t([[1.0, 2.0], [3.0, 4.0]]), _t([1.0, 1.0]))
    assert out.item() == 1.5


def test_weighted_mse_and_l1_divide_by_the_weight_sum():
    x, y, w = _t([1.0, 2.0]), _t([0.0, 0.0]), _t([1.0, 3.0])
    assert F.mse_loss(x, y, weight=w).item() == (1 + 12) / 4
    assert F.l1_loss(x, y, weight=w).item() == (1 + 6) / 4


@pytest.mark.parametrize("bad", [1.5, -0.25, math.nan])
def test_binary_cross_entropy_of_an_input_outside_0_1_is_torchs_error(torch, bad):
    for lib in (torch, numbagrad):
        with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
            lib.nn.functional.binary_cross_entropy(lib.tensor([0.5, bad]), lib.tensor([0.0, 1.0]))
