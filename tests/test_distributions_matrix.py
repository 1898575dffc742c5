"""The matrix-valued distributions (Wishart, LKJCholesky), CorrCholeskyTransform, and the matrix constraints
against torch.distributions: values and parameter gradients for fixed parameters, sample shapes, supports and
moments of seeded samples, and the errors of bad parameters."""

import math
import warnings

import numpy as np
import pytest

import numbagrad
import numbagrad.distributions as D
from numbagrad.autograd import gradcheck

LOWER = np.array([[1.2, 0.0, 0.0], [0.3, 0.9, 0.0], [-0.4, 0.2, 1.5]])
COV = LOWER @ LOWER.T
DF = np.array([4.0, 5.5])
CORR_L = np.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.6, 0.8]])


def _pair(torch, array, grad=False):
    """The same float64 values as a numbagrad tensor and a torch tensor."""
    ours = numbagrad.tensor(array, dtype=numbagrad.float64, requires_grad=grad)
    theirs = torch.tensor(array, dtype=torch.float64, requires_grad=grad)
    return ours, theirs


def _close(ours, theirs, **kw):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-9, atol=1e-10, **kw)


def _wisharts(torch, kind):
    """A Wishart with a batch of two dfs, built the same way in both libraries."""
    matrix = {"scale_tril": LOWER, "covariance_matrix": COV, "precision_matrix": np.linalg.inv(COV)}[kind]
    df, tdf = _pair(torch, DF)
    m, tm = _pair(torch, matrix)
    return D.Wishart(df, **{kind: m}), torch.distributions.Wishart(tdf, **{kind: tm})


@pytest.mark.parametrize("kind", ["scale_tril", "covariance_matrix", "precision_matrix"])
def test_wishart_values_match_torch(torch, kind):
    ours, theirs = _wisharts(torch, kind)
    value = COV * 4.4 + np.eye(3)
    _close(ours.log_prob(numbagrad.tensor(value)), theirs.log_prob(torch.tensor(value)))
    for name in ("entropy",):
        _close(getattr(ours, name)(), getattr(theirs, name)())
    for name in ("mean", "variance", "covariance_matrix", "precision_matrix", "scale_tril"):
        _close(getattr(ours, name), getattr(theirs, name))
    assert ours.batch_shape == (2,) and ours.event_shape == (3, 3)


def test_wishart_mode_is_nan_where_df_is_at_most_p_plus_1(torch):
    df, tdf = _pair(torch, np.array([3.5, 6.0]))
    m, tm = _pair(torch, COV)
    ours = D.Wishart(df, covariance_matrix=m).mode
    _close(ours, torch.distributions.Wishart(tdf, covariance_matrix=tm).mode, equal_nan=True)
    assert bool(ours[0].isnan().all()) and not bool(ours[1].isnan().any())


def test_wishart_log_prob_gradients_match_torch(torch):
    df, tdf = _pair(torch, DF, grad=True)
    tril, ttril = _pair(torch, LOWER, grad=True)
    value = COV * 4.4 + np.eye(3)
    D.Wishart(df, scale_tril=tril).log_prob(numbagrad.tensor(value)).sum().backward()
    torch.distributions.Wishart(tdf, scale_tril=ttril).log_prob(torch.tensor(value)).sum().backward()
    _close(df.grad, tdf.grad)
    # (torch's cholesky_solve also sends gradient to the unused upper triangle; the factor is its lower one)
    _close(tril.grad.tril(), ttril.grad.tril())


def test_wishart_entropy_gradient_in_df_matches_torch(torch):
    df, tdf = _pair(torch, DF, grad=True)
    m, tm = _pair(torch, COV)
    D.Wishart(df, covariance_matrix=m).entropy().sum().backward()
    torch.distributions.Wishart(tdf, covariance_matrix=tm).entropy().sum().backward()
    _close(df.grad, tdf.grad)


def test_wishart_kl_between_wisharts_matches_torch(torch):
    ours, theirs = _wisharts(torch, "scale_tril")
    m, tm = _pair(torch, COV + np.eye(3))
    other = D.Wishart(numbagrad.tensor(6.0, dtype=numbagrad.float64), covariance_matrix=m)
    tother = torch.distributions.Wishart(torch.tensor(6.0, dtype=torch.float64), covariance_matrix=tm)
    _close(D.kl_divergence(ours, other), torch.distributions.kl_divergence(theirs, tother))


def test_wishart_samples_are_positive_definite_with_the_right_shape():
    dist = D.Wishart(numbagrad.tensor(DF), scale_tril=numbagrad.tensor(LOWER))
    sample = dist.rsample((5,))
    assert sample.shape == (5, 2, 3, 3)
    assert bool(dist.support.check(sample).all())


def test_wishart_sample_mean_and_variance_match_the_moments():
    dist = D.Wishart(numbagrad.tensor(5.0, dtype=numbagrad.float64), scale_tril=numbagrad.tensor(LOWER))
    samples = dist.sample((20000,)).numpy()
    expected_mean = dist.mean.numpy()
    np.testing.assert_allclose(samples.mean(0), expected_mean, atol=0.05 * np.abs(expected_mean).max())
    np.testing.assert_allclose(samples.var(0), dist.variance.numpy(), rtol=0.1)


def test_wishart_samples_follow_manual_seed():
    dist = D.Wishart(numbagrad.tensor(DF), covariance_matrix=numbagrad.tensor(COV))
    numbagrad.manual_seed(3)
    first = dist.sample((2,))
    numbagrad.manual_seed(3)
    assert numbagrad.equal(first, dist.sample((2,)))


def test_wishart_rsample_is_differentiable_in_the_scale():
    def draw(tril):
        numbagrad.manual_seed(1)
        df = numbagrad.tensor(4.0, dtype=numbagrad.float64)
        return D.Wishart(df, scale_tril=tril.tril(), validate_args=False).rsample((2,))

    assert gradcheck(draw, (numbagrad.tensor(LOWER, requires_grad=True),))


def test_wishart_rsample_passes_gradients_to_df():
    df = numbagrad.tensor(4.0, requires_grad=True)
    D.Wishart(df, covariance_matrix=numbagrad.tensor(COV)).rsample((3,)).sum().backward()
    assert df.grad is not None and math.isfinite(float(df.grad))


def test_wishart_expand_keeps_the_parameters(torch):
    ours, theirs = _wisharts(torch, "covariance_matrix")
    expanded = ours.expand((4, 2))
    assert expanded.batch_shape == (4, 2) and expanded.event_shape == (3, 3)
    assert expanded.sample().shape == (4, 2, 3, 3)
    _close(expanded.entropy(), theirs.expand((4, 2)).entropy())


def test_wishart_rejects_df_not_above_p_minus_1(torch):
    with pytest.raises(ValueError, match=r"Value of df=2.0 expected to be greater than ndim - 1 = 2\."):
        D.Wishart(2.0, covariance_matrix=numbagrad.tensor(COV))
    with pytest.raises(ValueError, match="expected to be greater than ndim - 1"):
        torch.distributions.Wishart(2.0, covariance_matrix=torch.tensor(COV))


def test_wishart_needs_exactly_one_matrix():
    with pytest.raises(AssertionError, match="Exactly one of covariance_matrix or precision_matrix or scale_tril"):
        D.Wishart(4.0, covariance_matrix=numbagrad.tensor(COV), scale_tril=numbagrad.tensor(LOWER))
    with pytest.raises(ValueError, match="scale_tril must be at least two-dimensional"):
        D.Wishart(4.0, covariance_matrix=numbagrad.ones(3))


def test_wishart_warns_of_low_df():
    with pytest.warns(UserWarning, match="Low df values detected"):
        D.Wishart(2.5, covariance_matrix=numbagrad.tensor(COV))


def test_wishart_draws_positive_definite_samples_without_warning():
    dist = D.Wishart(numbagrad.tensor(DF), covariance_matrix=numbagrad.tensor(COV))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dist.rsample((3,))


def test_wishart_redraws_singular_samples_with_a_warning():
    """At df just above p - 1 and a tiny scale, many Bartlett samples are numerically singular: they are redrawn
    (up to max_try_correction times), so more of the samples come back positive definite."""
    with pytest.warns(UserWarning, match="Low df values detected"):
        dist = D.Wishart(numbagrad.tensor([2.0001, 2.0001]), covariance_matrix=numbagrad.eye(3) * 1e-20)
    numbagrad.manual_seed(0)
    kept = dist.support.check(dist.rsample((50,), max_try_correction=0)).float().mean()
    numbagrad.manual_seed(0)
    with pytest.warns(UserWarning, match="Singular sample detected."):
        redrawn = dist.rsample((50,))
    assert redrawn.shape == (50, 2, 3, 3)
    assert float(dist.support.check(redrawn).float().mean()) > float(kept)


def test_wishart_validates_parameters_and_values():
    with pytest.raises(ValueError, match="Expected parameter covariance_matrix"):
        D.Wishart(4.0, covariance_matrix=numbagrad.tensor(-COV), validate_args=True)
    dist = D.Wishart(4.0, covariance_matrix=numbagrad.tensor(COV), validate_args=True)
    with pytest.raises(ValueError, match="to be within the support"):
        dist.log_prob(-numbagrad.eye(3, dtype=numbagrad.float64))


def test_wishart_arg_constraints_and_support(torch):
    ours = D.Wishart(4.0, covariance_matrix=numbagrad.tensor(COV))
    theirs = torch.distributions.Wishart(4.0, covariance_matrix=torch.tensor(COV))
    assert repr(ours.arg_constraints) == repr(theirs.arg_constraints)
    assert repr(ours.support) == repr(theirs.support) and ours.has_rsample


@pytest.mark.parametrize("concentration", [0.5, 1.0, 2.5])
def test_lkj_cholesky_log_prob_and_its_gradient_match_torch(torch, concentration):
    c, tc = _pair(torch, np.array([concentration, concentration + 1.0]), grad=True)
    value, tvalue = _pair(torch, CORR_L)
    D.LKJCholesky(3, c).log_prob(value).sum().backward()
    torch.distributions.LKJCholesky(3, tc).log_prob(tvalue).sum().backward()
    _close(D.LKJCholesky(3, c).log_prob(value), torch.distributions.LKJCholesky(3, tc).log_prob(tvalue))
    _close(c.grad, tc.grad)


def test_lkj_cholesky_samples_lie_in_the_support():
    dist = D.LKJCholesky(4, numbagrad.tensor([0.5, 3.0]))
    sample = dist.sample((6,))
    assert sample.shape == (6, 2, 4, 4) and sample.dtype == numbagrad.float32
    assert bool(D.constraints.corr_cholesky.check(sample).all())


@pytest.mark.parametrize(("eta", "d"), [(2.0, 3), (0.5, 4)])
def test_lkj_cholesky_correlations_have_the_lkj_variance(eta, d):
    """Off-diagonal entries of ``L L^T`` have mean 0 and variance ``1 / (2 eta + d - 1)`` (every row: torch's
    sampler misses this for rows past the second)."""
    sample = D.LKJCholesky(d, numbagrad.tensor(eta, dtype=numbagrad.float64)).sample((20000,)).numpy()
    corr = sample @ np.swapaxes(sample, -1, -2)
    off = corr[:, np.tril_indices(d, -1)[0], np.tril_indices(d, -1)[1]]
    np.testing.assert_allclose(off.mean(0), 0.0, atol=0.02)
    np.testing.assert_allclose(off.var(0), 1 / (2 * eta + d - 1), rtol=0.06)


def test_lkj_cholesky_expand_and_errors(torch):
    dist = D.LKJCholesky(3, numbagrad.tensor([0.5, 2.0])).expand((4, 2))
    assert dist.batch_shape == (4, 2) and dist.sample().shape == (4, 2, 3, 3)
    with pytest.raises(ValueError, match="Expected dim to be an integer greater than or equal to 2. Found dim=1."):
        D.LKJCholesky(1)
    with pytest.raises(ValueError, match="Expected parameter concentration"):
        D.LKJCholesky(3, numbagrad.tensor(-1.0), validate_args=True)
    with pytest.raises(ValueError, match="to be within the support"):
        D.LKJCholesky(3, validate_args=True).log_prob(numbagrad.tensor(LOWER, dtype=numbagrad.float32))
    assert repr(D.LKJCholesky(3).support) == repr(torch.distributions.LKJCholesky(3).support)


def test_corr_cholesky_transform_matches_torch(torch):
    x, tx = _pair(torch, np.random.default_rng(0).standard_normal((2, 6)), grad=True)
    ours, theirs = D.CorrCholeskyTransform(), torch.distributions.CorrCholeskyTransform()
    y, ty = ours(x), theirs(tx)
    assert y.shape == (2, 4, 4)
    _close(y, ty)
    _close(ours.inv(y.detach()), theirs.inv(ty.detach()))
    _close(ours.log_abs_det_jacobian(x, y), theirs.log_abs_det_jacobian(tx, ty))
    ours.log_abs_det_jacobian(x, y).sum().backward()
    theirs.log_abs_det_jacobian(tx, ty).sum().backward()
    _close(x.grad, tx.grad)


def test_corr_cholesky_transform_round_trips_and_lands_in_the_support():
    x = numbagrad.randn(3, 3, dtype=numbagrad.float64)
    transform = D.CorrCholeskyTransform()
    y = transform(x)
    assert bool(D.constraints.corr_cholesky.check(y).all())
    np.testing.assert_allclose(transform.inv(y).numpy(), x.numpy(), atol=1e-10)


def test_corr_cholesky_transform_shapes():
    transform = D.CorrCholeskyTransform()
    assert transform.forward_shape((5, 6)) == (5, 4, 4)
    assert transform.inverse_shape((5, 4, 4)) == (5, 6)
    with pytest.raises(ValueError, match="Input is not a flattened lower-diagonal number"):
        transform.forward_shape((5,))
    with pytest.raises(ValueError, match="Input is not square"):
        transform.inverse_shape((4, 3))


def test_corr_cholesky_is_the_bijection_of_its_constraint():
    assert isinstance(D.biject_to(D.constraints.corr_cholesky), D.CorrCholeskyTransform)
    assert isinstance(D.transform_to(D.constraints.corr_cholesky), D.CorrCholeskyTransform)
    assert isinstance(D.transform_to(D.constraints.positive_semidefinite), D.PositiveDefiniteTransform)


def test_matrix_constraints_match_torch(torch):
    values = np.stack([CORR_L, LOWER, np.eye(3), np.diag([1.0, 0.0, 2.0]), -np.eye(3), COV - 2 * np.eye(3)])
    ours, theirs = numbagrad.tensor(values), torch.tensor(values)
    for name in ("corr_cholesky", "positive_semidefinite", "positive_definite", "lower_cholesky"):
        ok = getattr(D.constraints, name).check(ours)
        assert ok.tolist() == getattr(torch.distributions.constraints, name).check(theirs).tolist(), name


def test_integer_less_than_constraint(torch):
    values = [-3.0, 2.0, 2.5, 3.0]
    ours = D.constraints._IntegerLessThan(2).check(numbagrad.tensor(values))
    assert ours.tolist() == torch.distributions.constraints._IntegerLessThan(2).check(torch.tensor(values)).tolist()
    assert repr(D.constraints._IntegerLessThan(2)) == "IntegerLessThan(upper_bound=2)"


@pytest.mark.parametrize("diag", [-1, 0, 1])
def test_tril_matrix_vec_round_trip_matches_torch(torch, diag):
    from torch.distributions.utils import tril_matrix_to_vec as t_to_vec
    from torch.distributions.utils import vec_to_tril_matrix as t_to_mat

    from numbagrad.distributions.utils import tril_matrix_to_vec, vec_to_tril_matrix

    mat = np.arange(2 * 16, dtype=np.float64).reshape(2, 4, 4)
    vec = tril_matrix_to_vec(numbagrad.tensor(mat), diag)
    _close(vec, t_to_vec(torch.tensor(mat), diag))
    _close(vec_to_tril_matrix(vec, diag), t_to_mat(torch.tensor(vec.numpy()), diag))


def test_vec_to_tril_matrix_rejects_a_non_triangular_length():
    from numbagrad.distributions.utils import tril_matrix_to_vec, vec_to_tril_matrix

    with pytest.raises(ValueError, match="The size of last dimension is 5 which cannot be expressed"):
        vec_to_tril_matrix(numbagrad.zeros(5))
    with pytest.raises(ValueError, match=r"diag \(3\) provided is outside \[-3, 2\]\."):
        tril_matrix_to_vec(numbagrad.zeros(3, 3), 3)
