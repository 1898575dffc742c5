"""Student's t distribution with ``df`` degrees of freedom, location ``loc`` and scale ``scale``."""

from __future__ import annotations

import math

from .. import ops
from .._types import Size
from . import constraints
from .chi2 import Chi2
from .distribution import _EMPTY, Distribution
from .utils import _standard_normal, broadcast_all

__all__ = ["StudentT"]


class StudentT(Distribution):
    """``loc + scale * X / sqrt(Z / df)`` with X standard normal and Z chi-squared(df); its mean exists for
    ``df > 1``, its variance for ``df > 2`` (infinite for ``1 < df <= 2``)."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    @property
    def mean(self):
        return ops.where(self.df <= 1, math.nan, self.loc)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        finite = self.scale.pow(2) * df / ops.where(df > 2, df - 2, 1.0)
        return ops.where(df > 2, finite, ops.where(df > 1, math.inf, math.nan))

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None) -> None:
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(StudentT, _instance)
        batch_shape = Size(batch_shape)
        new.df = self.df.expand(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new._chi2 = self._chi2.expand(batch_shape)
        super(StudentT, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=_EMPTY):
        shape = tuple(self._extended_shape(sample_shape))
        x = _standard_normal(shape, dtype=self.df.dtype, device=self.df.device)
        z = self._chi2.rsample(sample_shape)
        y = x * ops.rsqrt(z / self.df)
        return self.loc + self.scale * y

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (
            self.scale.log()
            + 0.5 * self.df.log()
            + 0.5 * math.log(math.pi)
            + ops.lgamma(0.5 * self.df)
            - ops.lgamma(0.5 * (self.df + 1.0))
        )
        return -0.5 * (self.df + 1.0) * ops.log1p(y**2.0 / self.df) - z

    def entropy(self):
        lbeta = ops.lgamma(0.5 * self.df) + math.lgamma(0.5) - ops.lgamma(0.5 * (self.df + 1))
        return (
            self.scale.log()
            + 0.5 * (self.df + 1) * (ops.digamma(0.5 * (self.df + 1)) - ops.digamma(0.5 * self.df))
            + 0.5 * self.df.log()
            + lbeta
        )
