"""The von Mises distribution: a normal-like distribution of angles on the circle."""

from __future__ import annotations

import math

import numpy as np

from .. import ops
from .._types import Size
from ..autograd import no_grad
from ..ops.creation import _rng_for
from . import constraints
from .distribution import _EMPTY, Distribution
from .utils import broadcast_all, lazy_property

__all__ = ["VonMises"]

# Abramowitz & Stegun 9.8.1-9.8.4: I0 and I1 below 3.75 (in (x / 3.75)^2), and their scaled forms above (in
# 3.75 / x), accurate to about 1e-7 relative (torch uses the same fits, so log_prob agrees with it).
_BESSEL_SMALL = {
    0: (1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2),
    1: (0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2, 0.32411e-3),
}
_BESSEL_LARGE = {
    0: (0.39894228, 0.1328592e-1, 0.225319e-2, -0.157565e-2, 0.916281e-2, -0.2057706e-1, 0.2635537e-1,
        -0.1647633e-1, 0.392377e-2),
    1: (0.39894228, -0.3988024e-1, -0.362018e-2, 0.163801e-2, -0.1031555e-1, 0.2282967e-1, -0.2895312e-1,
        0.1787654e-1, -0.420059e-2),
}  # fmt: skip


def _polynomial(y, coefficients):
    """``sum(c_k y^k)`` by Horner's rule."""
    result = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        result = c + y * result
    return result


def _log_modified_bessel(x, order: int):
    """``log I_order(x)`` for ``x > 0`` and order 0 or 1, differentiable in ``x``."""
    small = _polynomial((x / 3.75) ** 2, _BESSEL_SMALL[order])
    if order == 1:
        small = x.abs() * small
    large = x - 0.5 * x.log() + _polynomial(3.75 / x, _BESSEL_LARGE[order]).log()
    return ops.where(x < 3.75, small.log(), large)


class VonMises(Distribution):
    """Angles (any real, read modulo 2 pi) with density ``exp(concentration cos(x - loc)) / (2 pi I0(kappa))``;
    samples lie in [-pi, pi)."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None) -> None:
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, Size(), validate_args)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.concentration * ops.cos(value - self.loc)
        return log_prob - math.log(2 * math.pi) - _log_modified_bessel(self.concentration, 0)

    @lazy_property
    def _proposal_r(self):
        kappa = self.concentration.detach().double()
        tau = 1 + (1 + 4 * kappa**2).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        return ops.where(kappa < 1e-5, 1 / kappa + kappa, (1 + rho**2) / (2 * rho))

    def sample(self, sample_shape=_EMPTY):
        """Best and Fisher's rejection sampler (1979), in float64 (small concentrations need it)."""
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            loc = np.broadcast_to(self.loc.detach().double()._host(), shape)
            kappa = np.broadcast_to(self.concentration.detach().double()._host(), shape)
            r = np.broadcast_to(self._proposal_r._host(), shape)
            rng = _rng_for(None)
            x = np.zeros(shape)
            done = np.zeros(shape, dtype=bool)
            while not done.all():
                u1, u2, u3 = rng.random((3,) + shape)
                z = np.cos(math.pi * u1)
                f = (1 + r * z) / (r + z)
                c = kappa * (r - f)
                with np.errstate(divide="ignore", invalid="ignore"):
                    accept = ~done & (((c * (2 - c) - u2) > 0) | (np.log(c / u2) + 1 - c >= 0))
                x = np.where(accept, np.sign(u3 - 0.5) * np.arccos(np.clip(f, -1.0, 1.0)), x)
                done |= accept
            angles = np.mod(x + math.pi + loc, 2 * math.pi) - math.pi
            return ops.as_tensor(angles.astype(self.loc._host().dtype), device=self.loc.device)

    def expand(self, batch_shape, _instance=None):
        validate_args = self.__dict__.get("_validate_args")
        return type(self)(self.loc.expand(batch_shape), self.concentration.expand(batch_shape), validate_args)

    @property
    def mean(self):
        """The circular mean."""
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        """The circular variance, ``1 - I1(kappa) / I0(kappa)``."""
        c = self.concentration
        return 1 - (_log_modified_bessel(c, 1) - _log_modified_bessel(c, 0)).exp()
