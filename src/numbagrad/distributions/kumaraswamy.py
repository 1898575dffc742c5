"""The Kumaraswamy distribution on [0, 1]: Beta-like, with a closed-form CDF."""

from __future__ import annotations

import math

from .. import ops
from . import constraints
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .uniform import Uniform
from .utils import broadcast_all, euler_constant

__all__ = ["Kumaraswamy"]


def _moments(a, b, n: int):
    """The n-th moment ``b B(1 + n / a, b)``."""
    arg1 = 1 + n / a
    return b * ops.exp(ops.lgamma(arg1) + ops.lgamma(b) - ops.lgamma(arg1 + b))


class Kumaraswamy(TransformedDistribution):
    """``(1 - U ** (1 / concentration0)) ** (1 / concentration1)`` for uniform ``U``."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None) -> None:
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base_dist = Uniform(
            ops.full_like(self.concentration0, 0), ops.full_like(self.concentration0, 1), validate_args=validate_args
        )
        transforms = [
            PowerTransform(exponent=self.concentration0.reciprocal()),
            AffineTransform(loc=1.0, scale=-1.0),
            PowerTransform(exponent=self.concentration1.reciprocal()),
        ]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        log_mode = (
            self.concentration0.reciprocal() * (-self.concentration0).log1p()
            - (-self.concentration0 * self.concentration1).log1p()
        )
        undefined = (self.concentration0 < 1) | (self.concentration1 < 1)
        return ops.where(undefined, math.nan, log_mode).exp()

    @property
    def variance(self):
        return _moments(self.concentration1, self.concentration0, 2) - ops.pow(self.mean, 2)

    def entropy(self):
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        h0 = ops.digamma(self.concentration0 + 1) + euler_constant
        return t0 + t1 * h0 - ops.log(self.concentration1) - ops.log(self.concentration0)
