"""``ExponentialFamily``: distributions with density ``exp(<t(x), theta> - F(theta) + k(x))``, whose entropy and
same-family KL divergence follow from the log normalizer ``F`` by automatic differentiation."""

from __future__ import annotations

from .. import autograd
from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Base of the exponential-family distributions: a subclass gives its natural parameters
    (``_natural_params``), its log normalizer (``_log_normalizer``) and the expected carrier measure
    (``_mean_carrier_measure``); entropy is then the Bregman divergence of the log normalizer."""

    @property
    def _natural_params(self) -> tuple:
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self) -> float:
        raise NotImplementedError

    def entropy(self):
        """``F(theta) - <theta, grad F(theta)> - E[k(x)]``."""
        result = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        lg_normal = self._log_normalizer(*nparams)
        gradients = autograd.grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for nparam, g in zip(nparams, gradients):
            result = result - (nparam * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
