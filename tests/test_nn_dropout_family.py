"""Channel dropout and alpha dropout: what the masks drop (whole channels, with probability p), the scaling that
keeps the mean (and, for alpha dropout, the variance of standard normal inputs), gradients through the mask, and
torch's errors, warnings and reprs."""

import warnings

import numpy as np
import pytest

import numbagrad
from numbagrad import nn
from numbagrad.nn import functional as F
from torch_oracle import raises_like


@pytest.mark.parametrize(
    "fn, shape", [(F.dropout1d, (40, 50, 7)), (F.dropout2d, (40, 50, 3, 4)), (F.dropout3d, (40, 50, 2, 3, 2))]
)
def test_channel_dropout_drops_whole_channels_with_probability_p(fn, shape):
    x = numbagrad.ones(*shape, dtype=numbagrad.float64, requires_grad=True)
    out = fn(x, 0.3)
    values = out.detach().numpy().reshape(shape[0], shape[1], -1)
    assert (values == values[..., :1]).all(), "one draw per channel"
    assert set(np.unique(values)) == {0.0, 1 / 0.7}
    assert abs((values[..., 0] == 0).mean() - 0.3) < 0.03
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), out.detach().numpy())


@pytest.mark.parametrize("fn, shape", [(F.dropout1d, (30, 4)), (F.dropout2d, (30, 4, 5)), (F.dropout3d, (30, 3, 2, 2))])
def test_channel_dropout_without_a_batch_dim_keeps_the_shape(fn, shape):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dropout2d's historical 3-D reading warns
        out = fn(numbagrad.ones(*shape), 0.5)
    assert tuple(out.shape) == shape


def test_channel_dropout_in_place_writes_the_input():
    x = numbagrad.ones(20, 30, 4)
    assert F.dropout1d(x, 0.5, inplace=True) is x
    assert set(np.unique(x.numpy())) == {0.0, 2.0}


def test_channel_dropout_is_the_identity_in_eval_and_zero_at_p_one():
    x = numbagrad.randn(2, 3, 4)
    assert F.dropout1d(x, 0.5, training=False) is x
    np.testing.assert_array_equal(F.dropout1d(x, 1.0).numpy(), np.zeros((2, 3, 4)))


@pytest.mark.parametrize("fn, feature", [(F.alpha_dropout, False), (F.feature_alpha_dropout, True)])
def test_alpha_dropout_keeps_zero_mean_and_unit_variance(fn, feature):
    numbagrad.manual_seed(1)
    x = numbagrad.randn(200, 100, 4, dtype=numbagrad.float64)
    out = fn(x, 0.2, training=True).numpy()
    assert abs(out.mean()) < 0.03 and abs(out.std() - 1.0) < 0.03
    if feature:
        dropped = out == out[..., :1]
        assert dropped.all(axis=-1).mean() > 0.15  # a dropped channel is one constant value
    assert fn(x, 0.2, training=False) is x


def test_alpha_dropout_backpropagates_the_scale_of_kept_elements():
    x = numbagrad.randn(1000, dtype=numbagrad.float64, requires_grad=True)
    out = F.alpha_dropout(x, 0.5, training=True)
    out.sum().backward()
    a = 1.0 / np.sqrt((1.7580993408473766**2 * 0.5 + 1) * 0.5)
    assert set(np.round(np.unique(x.grad.numpy()), 12)) == {0.0, round(a, 12)}


ERRORS = [
    lambda m: m.nn.functional.dropout1d(m.ones(2, 3, 4, 5)),
    lambda m: m.nn.functional.dropout2d(m.ones(2, 3), p=1.5),
    lambda m: m.nn.functional.alpha_dropout(m.ones(3), p=-0.1),
    lambda m: m.nn.functional.feature_alpha_dropout(m.ones(3), p=0.5, training=True),
]


@pytest.mark.torch
@pytest.mark.parametrize("call", ERRORS)
def test_errors_match_torch(call, torch):
    raises_like(torch, call)


@pytest.mark.torch
@pytest.mark.parametrize("fn, shape", [("dropout2d", (2, 3)), ("dropout2d", (2, 3, 4)), ("dropout3d", (2, 3, 4))])
def test_warnings_match_torch(fn, shape, torch):
    with pytest.warns(UserWarning) as theirs:
        getattr(torch.nn.functional, fn)(torch.ones(*shape))
    with pytest.warns(UserWarning) as ours:
        getattr(F, fn)(numbagrad.ones(*shape))
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]


@pytest.mark.torch
@pytest.mark.parametrize(
    "name, shape",
    [("Dropout1d", (2, 3, 4)), ("Dropout2d", (2, 3, 4, 5)), ("Dropout3d", (1, 2, 3, 4, 5)), ("AlphaDropout", (3,)),
     ("FeatureAlphaDropout", (2, 3, 4))],
)  # fmt: skip
def test_modules_print_and_switch_off_as_torchs(name, shape, torch):
    ours, theirs = getattr(nn, name)(0.2, inplace=True), getattr(torch.nn, name)(0.2, inplace=True)
    assert repr(ours) == repr(theirs)
    x = numbagrad.randn(*shape)
    assert ours.eval()(x) is x
