"""The continuous Bernoulli distribution on [0, 1] (Loaiza-Ganem and Cunningham, 2019)."""

from __future__ import annotations

import math
import numbers

from .. import ops
from .._types import Size
from ..autograd import no_grad
from ..nn.functional import binary_cross_entropy_with_logits
from . import constraints
from .categorical import _probs_or_logits
from .distribution import _EMPTY
from .exp_family import ExponentialFamily
from .utils import broadcast_all, clamp_probs, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(ExponentialFamily):
    """Density proportional to ``probs^x (1 - probs)^(1 - x)`` on [0, 1]. Near ``probs = 1/2`` (inside ``lims``)
    the normalizer and moments switch to their Taylor expansions, whose closed forms lose all digits there."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None) -> None:
        _probs_or_logits(probs, logits)
        if probs is not None:
            is_scalar = isinstance(probs, numbers.Number)
            (self.probs,) = broadcast_all(probs)
            if validate_args is not None and not bool(self.arg_constraints["probs"].check(self.probs).all()):
                raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
        else:
            is_scalar = isinstance(logits, numbers.Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        self._lims = lims
        super().__init__(Size() if is_scalar else self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        batch_shape = Size(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits
        super(ContinuousBernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _new(self, *args, **kwargs):
        return self._param.new(*args, **kwargs)

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        """``probs``, with those inside the unstable region moved to its edge (their branch is not used)."""
        return ops.where(self._outside_unstable_region(), self.probs, self._lims[0] * ops.ones_like(self.probs))

    def _cont_bern_log_norm(self):
        """The log of the normalizing constant ``log(|log(1-p) - log p| / |1 - 2p|)``."""
        cut = self._cut_probs()
        below_half = ops.where(cut <= 0.5, cut, ops.zeros_like(cut))
        above_half = ops.where(cut >= 0.5, cut, ops.ones_like(cut))
        log_norm = ops.log(ops.abs(ops.log1p(-cut) - ops.log(cut))) - ops.where(
            cut <= 0.5, ops.log1p(-2.0 * below_half), ops.log(2.0 * above_half - 1.0)
        )
        x = ops.pow(self.probs - 0.5, 2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return ops.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / (ops.log1p(-cut) - ops.log(cut))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * ops.pow(x, 2)) * x
        return ops.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self):
        return ops.sqrt(self.variance)

    @property
    def variance(self):
        cut = self._cut_probs()
        variances = cut * (cut - 1.0) / ops.pow(1.0 - 2.0 * cut, 2) + 1.0 / ops.pow(ops.log1p(-cut) - ops.log(cut), 2)
        x = ops.pow(self.probs - 0.5, 2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return ops.where(self._outside_unstable_region(), variances, taylor)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    def sample(self, sample_shape=_EMPTY):
        u = ops.rand(tuple(self._extended_shape(sample_shape)), dtype=self.probs.dtype, device=self.probs.device)
        with no_grad():
            return self.icdf(u)

    def rsample(self, sample_shape=_EMPTY):
        u = ops.rand(tuple(self._extended_shape(sample_shape)), dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (ops.pow(cut, value) * ops.pow(1.0 - cut, 1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = ops.where(self._outside_unstable_region(), cdfs, value)
        return ops.where(value <= 0.0, ops.zeros_like(value), ops.where(value >= 1.0, ops.ones_like(value), unbounded))

    def icdf(self, value):
        cut = self._cut_probs()
        inverse = (ops.log1p(-cut + value * (2.0 * cut - 1.0)) - ops.log1p(-cut)) / (ops.log(cut) - ops.log1p(-cut))
        return ops.where(self._outside_unstable_region(), inverse, value)

    def entropy(self):
        log_probs0 = ops.log1p(-self.probs)
        log_probs1 = ops.log(self.probs)
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        """The log normalizer as a function of the natural parameter (Taylor series near 0)."""
        outside = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut = ops.where(outside, x, (self._lims[0] - 0.5) * ops.ones_like(x))
        log_norm = ops.log(ops.abs(ops.expm1(cut))) - ops.log(ops.abs(cut))
        taylor = 0.5 * x + ops.pow(x, 2) / 24.0 - ops.pow(x, 4) / 2880.0
        return ops.where(outside, log_norm, taylor)
