"""nn.functional against torch: values, dtypes, gradients and printed node names, plus gradcheck in float64.

Each case is a call of the sample registry (``numbagrad.nn._samples``, collected by ``tests/samples.py``), written
once for both libraries (``fn(F, *tensors)``), with its tensor inputs drawn from ``T`` specs. The torch
comparisons skip without torch; gradcheck runs everywhere.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import gradcheck
from numbagrad.nn import functional as NF
from samples import NN_CALLS, call_inputs, call_params, nn_calls, run, tensors

pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths:UserWarning")


CASES = call_params(nn_calls())


@pytest.mark.parametrize("case", [c for c in CASES if c.values[0].true_gradient])
def test_gradcheck_float64(case):
    inputs = call_inputs(case, numbagrad)
    diff = [t for t in inputs if t.requires_grad]

    def fn(*leaves):
        it = iter(leaves)
        args = [next(it) if t.requires_grad else t for t in inputs]
        return tuple(t for t in tensors(run(case, numbagrad, *args)) if t.is_floating_point())

    assert gradcheck(fn, tuple(diff))


@pytest.mark.torch
@pytest.mark.parametrize("case", CASES)
def test_matches_torch(case):
    torch = pytest.importorskip("torch")
    ours_in, theirs_in = call_inputs(case, numbagrad), call_inputs(case, torch)
    ours, theirs = tensors(run(case, numbagrad, *ours_in)), tensors(run(case, torch, *theirs_in))
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
               for t in call_inputs(case, numbagrad)]  # fmt: skip
    theirs_in = [t.detach().float().requires_grad_(t.requires_grad) if t.is_floating_point() else t
                 for t in call_inputs(case, torch)]  # fmt: skip
    ours = tensors(run(case, numbagrad, *ours_in))
    theirs = tensors(run(case, torch, *theirs_in))
    for a, b in zip(ours, theirs):
        assert a.dtype.name == str(b.dtype).replace("torch.", "")
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=2e-5, atol=2e-6)


def test_case_names_are_unique():
    names = [call.id for call in nn_calls()]
    assert len(names) == len(set(names))


def test_samples_are_keyed_by_functions_of_nn_functional():
    assert [name for name in NN_CALLS if not callable(getattr(NF, name, None))] == []


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
