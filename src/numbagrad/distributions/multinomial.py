"""The multinomial distribution: category counts of ``total_count`` Categorical draws."""

from __future__ import annotations

import math

from .. import ops
from .._types import Size
from ..nn import functional as F
from . import constraints
from .binomial import Binomial
from .categorical import Categorical
from .distribution import _EMPTY, Distribution
from .utils import broadcast_all

__all__ = ["Multinomial"]


class Multinomial(Distribution):
    """Counts per category (summing to ``total_count``) of independent draws with ``probs`` or ``logits``."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def __init__(self, total_count: int = 1, probs=None, logits=None, validate_args=None) -> None:
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = Size(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        super(Multinomial, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _new(self, *args, **kwargs):
        return self._categorical._new(*args, **kwargs)

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def param_shape(self) -> Size:
        return self._categorical.param_shape

    def sample(self, sample_shape=_EMPTY):
        sample_shape = tuple(sample_shape)
        k = self._categorical._num_events
        draws = self._categorical.sample((self.total_count,) + sample_shape)
        return F.one_hot(draws, k).sum(0).type_as(self.probs)

    def entropy(self):
        n = ops.tensor(self.total_count)  # (an integer tensor: its lgamma is in the default dtype, as torch's)
        term1 = n * self._categorical.entropy() - ops.lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = ops.exp(self._binomial.log_prob(support))
        weights = ops.lgamma(support + 1)
        return term1 + (binomial_probs * weights).sum(0).sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = ops.lgamma(value.sum(-1) + 1)
        log_factorial_xs = ops.lgamma(value + 1).sum(-1)
        logits = ops.where((value == 0) & (logits == -math.inf), 0.0, logits)  # (0 * log 0 is 0 here)
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)
