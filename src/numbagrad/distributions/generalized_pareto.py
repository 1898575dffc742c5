"""The generalized Pareto distribution (peaks over a threshold)."""

from __future__ import annotations

import math
import numbers

from .. import ops
from .._types import Size
from . import constraints
from .distribution import _EMPTY, Distribution
from .utils import broadcast_all

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    """Survival ``(1 + concentration * z) ** (-1 / concentration)`` in ``z = (x - loc) / scale`` (the exponential
    ``exp(-z)`` at concentration 0); bounded above when the concentration is negative."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None) -> None:
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        numbers_only = all(isinstance(v, numbers.Number) for v in (loc, scale, concentration))
        super().__init__(Size() if numbers_only else self.loc.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(GeneralizedPareto, _instance)
        batch_shape = Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        super(GeneralizedPareto, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=_EMPTY):
        u = ops.rand(tuple(self._extended_shape(sample_shape)), dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(u)

    def _z(self, x):
        return (x - self.loc) / self.scale

    def _zero_and_safe_concentration(self):
        """Where the concentration is (close to) 0, and the concentration with 1 there (its branch is unused)."""
        eq_zero = ops.isclose(self.concentration, ops.zeros_like(self.concentration))
        return eq_zero, ops.where(eq_zero, ops.ones_like(self.concentration), self.concentration)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe = self._zero_and_safe_concentration()
        y = 1 / safe + ops.ones_like(z)
        where_nonzero = ops.where(y == 0, y, y * ops.log1p(safe * z))
        log_scale = math.log(self.scale) if isinstance(self.scale, numbers.Real) else self.scale.log()
        return -log_scale - ops.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value):
        """``log(1 - cdf(value))``."""
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe = self._zero_and_safe_concentration()
        return ops.where(eq_zero, -z, -ops.log1p(safe * z) / safe)

    def log_cdf(self, value):
        """``log(cdf(value))``."""
        return ops.log1p(-ops.exp(self.log_survival_function(value)))

    def cdf(self, value):
        return ops.exp(self.log_cdf(value))

    def icdf(self, value):
        eq_zero, safe = self._zero_and_safe_concentration()
        logu = ops.log1p(-value)
        where_nonzero = self.loc + self.scale / safe * ops.expm1(-safe * logu)
        return ops.where(eq_zero, self.loc - self.scale * logu, where_nonzero)

    @property
    def mean(self):
        valid = self.concentration < 1
        safe = ops.where(valid, self.concentration, 0.5)
        return ops.where(valid, self.loc + self.scale / (1 - safe), math.nan)

    @property
    def variance(self):
        valid = self.concentration < 0.5
        safe = ops.where(valid, self.concentration, 0.25)
        return ops.where(valid, self.scale**2 / ((1 - safe) ** 2 * (1 - 2 * safe)), math.nan)

    def entropy(self):
        return (ops.log(self.scale) + self.concentration + 1).expand(tuple(self._batch_shape))

    @property
    def mode(self):
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        upper = ops.where(self.concentration < 0, self.loc - self.scale / self.concentration, math.inf)
        return constraints.interval(self.loc, upper)
