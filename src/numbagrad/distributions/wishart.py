"""The Wishart distribution over positive-definite matrices, parameterized by ``df`` and a covariance, precision
or lower Cholesky factor (kept, as MultivariateNormal does, as the covariance's Cholesky factor)."""

from __future__ import annotations

import math
import numbers
import warnings

from .. import ops
from .._tensor import Tensor
from .._typeinfo import finfo
from .._types import Size, broadcast_shapes
from ..ops.linalg_functions import slogdet
from . import constraints
from ._linalg import cholesky
from .chi2 import Chi2
from .distribution import _EMPTY
from .exp_family import ExponentialFamily
from .multivariate_normal import _precision_to_scale_tril
from .utils import lazy_property

__all__ = ["Wishart"]

_LOG_2 = math.log(2)


def _mvdigamma(x: Tensor, p: int) -> Tensor:
    """The multivariate digamma function: ``sum_i digamma(x - i / 2)`` for ``i < p`` (the derivative of
    ``mvlgamma``), defined for ``x > (p - 1) / 2``."""
    if not bool(x.gt((p - 1) / 2).all()):
        raise AssertionError("Wrong domain for multivariate digamma function.")
    halves = ops.arange(p, dtype=x.dtype, device=x.device).div(2)
    return ops.digamma(x.unsqueeze(-1) - halves.expand(tuple(x.shape) + (-1,))).sum(-1)


def _chi2_of_bartlett(df: Tensor, p: int, batch_shape: Size, like: Tensor) -> Chi2:
    """The chi-squared laws of the Bartlett factor's squared diagonal: ``df - i`` degrees of freedom for row i."""
    offsets = ops.arange(p, dtype=like.dtype, device=like.device).expand(tuple(batch_shape) + (-1,))
    return Chi2(df=df.unsqueeze(-1) - offsets)


class Wishart(ExponentialFamily):
    """W(df, Sigma): the law of ``X^T X`` for ``df`` rows ``X_i ~ N(0, Sigma)`` (``df`` may be any real above
    ``p - 1``), given exactly one of ``covariance_matrix``, ``precision_matrix`` and ``scale_tril``.

    Samples use the Bartlett decomposition: ``L A A^T L^T`` with ``A`` lower triangular, ``A_ii^2 ~ Chi2(df - i)``
    and standard normals below the diagonal, so ``rsample`` is differentiable in ``df`` and the scale. A sample
    that is not positive definite (possible for ``df`` near ``p - 1``) is redrawn up to ``max_try_correction``
    times with a warning."""

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self) -> dict:  # type: ignore[override]
        return {
            "covariance_matrix": constraints.positive_definite,
            "precision_matrix": constraints.positive_definite,
            "scale_tril": constraints.lower_cholesky,
            "df": constraints.greater_than(self.event_shape[-1] - 1),
        }

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None) -> None:
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        param = next(p for p in (covariance_matrix, precision_matrix, scale_tril) if p is not None)
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if isinstance(df, numbers.Number):
            batch_shape = Size(param.shape[:-2])
            self.df = ops.tensor(df, dtype=param.dtype, device=param.device)
        else:
            batch_shape = Size(broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape)))
            self.df = df.expand(batch_shape)
        event_shape = Size(param.shape[-2:])
        p = event_shape[-1]
        if bool(self.df.le(p - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        expanded = param.expand(tuple(batch_shape) + (-1, -1))
        if scale_tril is not None:
            self.scale_tril = expanded
        elif covariance_matrix is not None:
            self.covariance_matrix = expanded
        else:
            self.precision_matrix = expanded
        if bool(self.df.lt(p).any()):
            warnings.warn(
                "Low df values detected. Singular samples are highly likely to occur for ndim - 1 < df < ndim.",
                stacklevel=2,
            )
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._batch_dims = [-(x + 1) for x in range(len(self._batch_shape))]
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = _chi2_of_bartlett(self.df, p, batch_shape, self._unbroadcasted_scale_tril)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = Size(batch_shape)
        cov_shape = tuple(batch_shape) + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(batch_shape)
        new._batch_dims = [-(x + 1) for x in range(len(batch_shape))]
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(cov_shape))
        p = self.event_shape[-1]
        new._dist_chi2 = _chi2_of_bartlett(new.df, p, batch_shape, new._unbroadcasted_scale_tril)
        super(Wishart, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self) -> tuple:
        return tuple(self._batch_shape) + tuple(self._event_shape)

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        lower = self._unbroadcasted_scale_tril
        return ops.matmul(lower, lower.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        lower = self._unbroadcasted_scale_tril
        identity = ops.eye(self._event_shape[-1], dtype=lower.dtype, device=lower.device)
        return ops.cholesky_solve(identity, lower).expand(self._matrix_shape())

    def _per_batch(self, x: Tensor) -> Tensor:
        """``x`` (batch-shaped) viewed with two trailing unit dims, to scale the matrices of its batch."""
        return x.reshape(tuple(self._batch_shape) + (1, 1))

    @property
    def mean(self):
        return self._per_batch(self.df) * self.covariance_matrix

    @property
    def mode(self):
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = ops.where(factor <= 0, ops.full_like(factor, math.nan), factor)
        return self._per_batch(factor) * self.covariance_matrix

    @property
    def variance(self):
        v = self.covariance_matrix
        diag_v = v.diagonal(dim1=-2, dim2=-1)
        return self._per_batch(self.df) * (v.pow(2) + diag_v.unsqueeze(-1) * diag_v.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape) -> Tensor:
        p = self._event_shape[-1]
        chi = self._dist_chi2.rsample(sample_shape).sqrt()
        noise = ops.diag_embed(chi.clamp(min=finfo(chi.dtype).eps), dim1=-2, dim2=-1)
        i, j = ops.tril_indices(p, p, offset=-1)
        shape = tuple(sample_shape) + tuple(self._batch_shape) + (p * (p - 1) // 2,)
        noise[..., i, j] = ops.randn(shape, dtype=noise.dtype, device=noise.device)
        chol = ops.matmul(self._unbroadcasted_scale_tril, noise)
        return ops.matmul(chol, chol.mT)

    def _singular(self, sample: Tensor) -> Tensor:
        """Per sample (reduced over the batch): whether any of its matrices is not positive definite."""
        singular = ~self.support.check(sample)
        if self._batch_shape:
            singular = singular.amax(self._batch_dims)
        return singular

    def rsample(self, sample_shape=_EMPTY, max_try_correction=None):
        """Bartlett samples; the (rare) non-positive-definite ones are redrawn, with a warning, up to
        ``max_try_correction`` (10) times and may remain singular after that (their ``log_prob`` is then -inf)."""
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = Size(sample_shape)
        sample = self._bartlett_sampling(sample_shape)
        is_singular = self._singular(sample)
        if bool(is_singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                sample_new = self._bartlett_sampling(is_singular[is_singular].shape)
                sample[is_singular] = sample_new
                is_singular[is_singular.clone()] = self._singular(sample_new)
                if not bool(is_singular.any()):
                    break
        return sample

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        trace = ops.cholesky_solve(value, self._unbroadcasted_scale_tril).diagonal(dim1=-2, dim2=-1).sum(dim=-1)
        return (
            -nu * (p * _LOG_2 / 2 + half_log_det)
            - ops.mvlgamma(nu / 2, p=p)
            + (nu - p - 1) / 2 * slogdet(value)[1]
            - trace / 2
        )

    def entropy(self):
        nu = self.df
        p = self._event_shape[-1]
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return (
            (p + 1) * (p * _LOG_2 / 2 + half_log_det)
            + ops.mvlgamma(nu / 2, p=p)
            - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p=p)
            + nu * p / 2
        )

    @property
    def _natural_params(self) -> tuple:
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (self.df - p - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        return (y + (p + 1) / 2) * (-slogdet(-2 * x)[1] + _LOG_2 * p) + ops.mvlgamma(y + (p + 1) / 2, p=p)
