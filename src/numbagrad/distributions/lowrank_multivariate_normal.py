"""The multivariate normal with a low-rank-plus-diagonal covariance ``cov_factor @ cov_factor.T + diag(cov_diag)``,
scored through the small "capacitance" matrix (Woodbury identity and the matrix determinant lemma)."""

from __future__ import annotations

import math

from .. import ops
from .._types import Size, broadcast_shapes
from . import constraints
from ._linalg import cholesky, solve_triangular
from .distribution import _EMPTY, Distribution
from .multivariate_normal import _batch_mahalanobis, _batch_mv
from .utils import _standard_normal, lazy_property

__all__ = ["LowRankMultivariateNormal"]


def _eye_like(t, n: int):
    return ops.eye(n, dtype=t.dtype, device=t.device)


def _batch_capacitance_tril(w, d):
    """The Cholesky factor of ``I + W^T D^-1 W``."""
    m = w.size(-1)
    return cholesky(ops.matmul(w.mT / d.unsqueeze(-2), w) + _eye_like(w, m))


def _batch_lowrank_logdet(w, d, capacitance_tril):
    """``log |W W^T + D| = log |C| + log |D|``."""
    return 2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + d.log().sum(-1)


def _batch_lowrank_mahalanobis(w, d, x, capacitance_tril):
    """``x^T (W W^T + D)^-1 x`` by the Woodbury identity."""
    wt_dinv = w.mT / d.unsqueeze(-2)
    return (x.pow(2) / d).sum(-1) - _batch_mahalanobis(capacitance_tril, _batch_mv(wt_dinv, x))


class LowRankMultivariateNormal(Distribution):
    """N(loc, cov_factor @ cov_factor.T + diag(cov_diag)); cheap when the rank is small."""

    arg_constraints = {
        "loc": constraints.real_vector,
        "cov_factor": constraints.independent(constraints.real, 2),
        "cov_diag": constraints.independent(constraints.positive, 1),
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None) -> None:
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = loc.shape[-1:]
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if cov_factor.shape[-2:-1] != event_shape:
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m")
        if cov_diag.shape[-1:] != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        try:
            shape = broadcast_shapes(tuple(loc.shape) + (1,), tuple(cov_factor.shape), tuple(cov_diag.shape) + (1,))
        except (RuntimeError, ValueError) as error:
            raise ValueError(
                f"Incompatible batch shapes: loc {loc.shape}, cov_factor {cov_factor.shape}, cov_diag {cov_diag.shape}"
            ) from error
        self.cov_factor = cov_factor.expand(shape)
        self.loc = loc.expand(shape[:-1])
        self.cov_diag = cov_diag.expand(shape[:-1])
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)
        super().__init__(self.loc.shape[:-1], event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        loc_shape = tuple(Size(batch_shape)) + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        super(LowRankMultivariateNormal, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self) -> tuple:
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        shape = tuple(self._batch_shape) + tuple(self._event_shape)
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag).expand(shape)

    @lazy_property
    def scale_tril(self):
        n = self._event_shape[0]
        diag_sqrt = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        dinvsqrt_w = self._unbroadcasted_cov_factor / diag_sqrt
        k = ops.matmul(dinvsqrt_w, dinvsqrt_w.mT) + _eye_like(dinvsqrt_w, n)
        return (diag_sqrt * cholesky(k)).expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        return (ops.matmul(w, w.mT) + d.unsqueeze(-1) * _eye_like(d, d.shape[-1])).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        a = solve_triangular(self._capacitance_tril, w.mT / d.unsqueeze(-2), upper=False)
        inverse_diag = d.reciprocal().unsqueeze(-1) * _eye_like(d, d.shape[-1])
        return (inverse_diag - ops.matmul(a.mT, a)).expand(self._matrix_shape())

    def rsample(self, sample_shape=_EMPTY):
        shape = tuple(self._extended_shape(sample_shape))
        w_shape = shape[:-1] + tuple(self.cov_factor.shape[-1:])
        eps_w = _standard_normal(w_shape, dtype=self.loc.dtype, device=self.loc.device)
        eps_d = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_w) + self._unbroadcasted_cov_diag.sqrt() * eps_d

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        m = _batch_lowrank_mahalanobis(w, d, value - self.loc, self._capacitance_tril)
        log_det = _batch_lowrank_logdet(w, d, self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + log_det + m)

    def entropy(self):
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        log_det = _batch_lowrank_logdet(w, d, self._capacitance_tril)
        h = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + log_det)
        return h if len(self._batch_shape) == 0 else h.expand(self._batch_shape)
