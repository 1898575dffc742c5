"""nn.init's structured initialisers: exact values where they are deterministic (eye_, dirac_, against torch),
the defining property where they are random (orthogonality, truncation, sparsity), and torch's errors."""

import math

import numpy as np
import pytest

import numbagrad
from numbagrad import nn


@pytest.mark.torch
@pytest.mark.parametrize("shape, groups", [((4, 2, 3), 1), ((6, 3, 3, 3), 1), ((6, 2, 3, 5), 3), ((2, 5, 3, 3, 3), 2)])
def test_dirac_matches_torch(shape, groups, torch):
    ours, theirs = numbagrad.empty(*shape), torch.empty(*shape)
    nn.init.dirac_(ours, groups)
    torch.nn.init.dirac_(theirs, groups)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.torch
@pytest.mark.parametrize("shape", [(3, 5), (4, 2)])
def test_eye_matches_torch(shape, torch):
    ours = nn.init.eye_(numbagrad.empty(*shape, dtype=numbagrad.float64))
    np.testing.assert_array_equal(ours.numpy(), torch.nn.init.eye_(torch.empty(*shape)).numpy())
    assert ours.dtype == numbagrad.float64


def test_init_runs_on_parameters_without_recording_a_graph():
    w = nn.Parameter(numbagrad.empty(3, 3))
    for init in (nn.init.eye_, nn.init.orthogonal_, nn.init.trunc_normal_, lambda t: nn.init.sparse_(t, 0.5)):
        assert init(w) is w
        assert w.grad_fn is None and w.requires_grad


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 2, 3)])
def test_orthogonal_gives_orthonormal_rows_or_columns_times_gain(shape):
    w = nn.init.orthogonal_(numbagrad.empty(*shape, dtype=numbagrad.float64), gain=2.0)
    flat = w.numpy().reshape(shape[0], -1)
    small = min(flat.shape)
    gram = flat @ flat.T if flat.shape[0] == small else flat.T @ flat
    np.testing.assert_allclose(gram, 4.0 * np.eye(small), atol=1e-12)


def test_orthogonal_is_seeded_by_manual_seed():
    numbagrad.manual_seed(3)
    a = nn.init.orthogonal_(numbagrad.empty(4, 4))
    numbagrad.manual_seed(3)
    b = nn.init.orthogonal_(numbagrad.empty(4, 4))
    np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("mean, std, a, b", [(0.0, 1.0, -2.0, 2.0), (0.0, 1.0, 2.0, 2.5), (1.0, 0.5, -1.0, 0.0)])
def test_trunc_normal_stays_in_bounds_with_the_truncated_mean(mean, std, a, b):
    w = numbagrad.empty(20000, dtype=numbagrad.float64)
    nn.init.trunc_normal_(w, mean, std, a, b)
    x = w.numpy()
    assert x.min() >= a and x.max() <= b
    alpha, beta = (a - mean) / std, (b - mean) / std
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2  # noqa: E731
    expected = mean + std * (pdf(alpha) - pdf(beta)) / (cdf(beta) - cdf(alpha))
    assert abs(x.mean() - expected) < 0.02 * max(1.0, std)


def test_trunc_normal_warns_when_the_mean_is_far_from_the_interval():
    with pytest.warns(UserWarning, match="mean is more than 2 std from"):
        nn.init.trunc_normal_(numbagrad.empty(10), mean=5.0, std=1.0, a=-1.0, b=1.0)


def test_sparse_zeroes_the_same_count_in_every_column():
    w = nn.init.sparse_(numbagrad.empty(10, 6, dtype=numbagrad.float64), sparsity=0.25, std=0.5)
    zeros = (w.numpy() == 0).sum(axis=0)
    np.testing.assert_array_equal(zeros, [3] * 6)
    assert 0.2 < w.numpy()[w.numpy() != 0].std() < 0.8


@pytest.mark.torch
@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.nn.init.eye_(m.empty(2, 2, 2)),
        lambda m: m.nn.init.dirac_(m.empty(3, 3)),
        lambda m: m.nn.init.dirac_(m.empty(5, 2, 3), groups=2),
        lambda m: m.nn.init.orthogonal_(m.empty(3)),
        lambda m: m.nn.init.sparse_(m.empty(3, 3, 3), 0.1),
    ],
)
def test_errors_match_torch(call, torch):
    with pytest.raises(ValueError) as theirs:
        call(torch)
    with pytest.raises(ValueError) as ours:
        call(numbagrad)
    assert str(ours.value) == str(theirs.value)
